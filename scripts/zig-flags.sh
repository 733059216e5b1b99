# scripts/zig-flags.sh: sourced by the clang builds (sanitize.sh, fuzz.sh) to get the -D
# flags of build.zig (sqlite_flags, posix_flags, engine_flags) from the file itself, so that
# there is one list only. Run from the repository root; $1 names the caller in errors.
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
if [ ${#sqlite_flags[@]} -lt 5 ] || [ ${#posix_flags[@]} -lt 1 ] || [ ${#engine_flags[@]} -lt 3 ]; then
  echo "$1: cannot read the flag lists from build.zig" >&2
  exit 1
fi
