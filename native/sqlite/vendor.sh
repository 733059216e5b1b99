#!/usr/bin/env bash
# Vendors the SQLite amalgamation again from its origin (see SOURCE.md) and checks
# every file against the recorded sha256. Run from anywhere; needs npm and tar.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pkg="better-sqlite3@13.2.0"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
(cd "$work" && npm pack --silent "$pkg" >/dev/null && tar xzf ./*.tgz)
for f in sqlite3.c sqlite3.h sqlite3ext.h; do
  cp "$work/package/deps/sqlite3/$f" "$here/$f"
done
"$here/check.sh"
