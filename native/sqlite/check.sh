#!/usr/bin/env bash
# Checks the vendored amalgamation against the sha256 sums recorded in SHA256SUMS.
set -euo pipefail
cd "$(dirname "$0")"
sha256sum --quiet -c SHA256SUMS
grep -q '^#define SQLITE_VERSION  *"3.54.1"' sqlite3.h
echo "native/sqlite: SQLite 3.54.1, checksums match"
