# scripts/zig-flags.sh: sourced by the clang builds (sanitize.sh, fuzz.sh) to get the -D
# flags of build.zig (sqlite_flags, posix_flags, engine_flags) and the engine's folders
# (engine_dirs) from the file itself, so that there is one list only. Sets also
# engine_includes (-Inative/src: the only include path of the engine's headers, which
# are included with their folder) and engine_srcs (every .c of the folders). Run from the
# repository root; $1 names the caller in errors.
zig_list() {
  awk -v name="$1" '
    $0 ~ "^const " name " = " { on = 1; next }
    on && /^};/ { exit }
    on { if (match($0, /"[^"]*"/)) print substr($0, RSTART + 1, RLENGTH - 2) }
  ' build.zig
}
mapfile -t sqlite_flags < <(zig_list sqlite_flags)
mapfile -t posix_flags < <(zig_list posix_flags)
mapfile -t engine_flags < <(zig_list engine_flags)
mapfile -t engine_dirs < <(zig_list engine_dirs)
engine_includes=(-Inative/src)
engine_srcs=()
for d in "${engine_dirs[@]}"; do
  for f in "$d"/*.c; do [ -e "$f" ] && engine_srcs+=("$f"); done
done
if [ ${#sqlite_flags[@]} -lt 5 ] || [ ${#posix_flags[@]} -lt 1 ] || [ ${#engine_flags[@]} -lt 3 ] ||
   [ ${#engine_dirs[@]} -lt 2 ] || [ ${#engine_srcs[@]} -lt 10 ]; then
  echo "$1: cannot read the flag lists or the engine folders from build.zig" >&2
  exit 1
fi
