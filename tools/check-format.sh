#!/usr/bin/env bash
# Checks that every tracked C and C++ file is formatted as .clang-format says; lists the files
# that are not and exits 1. With --fix, formats them in place instead. Needs clang-format-14
# (tools/install-deps.sh --ci), the version whose output the checked-in files match.
set -euo pipefail
cd "$(dirname "$0")/.."
clang_format=${CLANG_FORMAT:-clang-format-14}
if ! command -v "$clang_format" >/dev/null; then
  echo "check-format: $clang_format not found (tools/install-deps.sh --ci installs it)" >&2
  exit 2
fi
mapfile -t files < <(git ls-files -- '*.cc' '*.h' '*.c')
if [ "${1:-}" = "--fix" ]; then
  "$clang_format" -i "${files[@]}"
  exit 0
fi
# One run over every file; its diagnostics name each file that differs ("f.cc:3:1: error: ...").
rc=0
out=$("$clang_format" --dry-run --Werror "${files[@]}" 2>&1) || rc=$?
mapfile -t bad < <(sed -n 's/^\([^:]*\):[0-9]*:[0-9]*: error: code should be clang-formatted.*/\1/p' \
                   <<<"$out" | sort -u)
if [ $rc -ne 0 ] && [ ${#bad[@]} -eq 0 ]; then
  echo "$out" >&2
  echo "check-format: $clang_format failed (exit $rc)" >&2
  exit 2
fi
if [ ${#bad[@]} -ne 0 ]; then
  echo "check-format: ${#bad[@]} of ${#files[@]} files differ from .clang-format" \
       "(tools/check-format.sh --fix, or clang-format-14 -i FILE):" >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "check-format: ${#files[@]} files formatted"
