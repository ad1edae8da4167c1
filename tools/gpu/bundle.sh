#!/usr/bin/env bash
# Packs what tools/gpu/check.sh needs from a build into one folder that can travel to a machine
# with a GPU but without Debian's -dev packages (docs/PERFORMANCE.md, "On a real GPU"):
# stripped kolo-bench, kolorun, kolo-timeline and nccl-peer-bench, the test binaries of
# `ctest -L gpu`, the shared libraries they load beyond glibc, and check.sh itself. NCCL is left
# out (218 MB): check.sh uses the target machine's own libnccl.so.2.
# Usage: tools/gpu/bundle.sh BUILD_DIR DEST_DIR
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: bundle.sh BUILD_DIR DEST_DIR}" && pwd)
dest=${2:?usage: bundle.sh BUILD_DIR DEST_DIR}
rm -rf "$dest"
mkdir -p "$dest/bin" "$dest/tests" "$dest/lib"
for b in kolo-bench kolorun kolo-timeline nccl-peer-bench; do
  [[ -x "$build/bin/$b" ]] || { echo "bundle.sh: $build/bin/$b is missing (build it first)" >&2; exit 1; }
  strip -o "$dest/bin/$b" "$build/bin/$b"
done
tests=$(ctest --test-dir "$build" -N -L gpu | sed -n 's/^ *Test *#[0-9]*: //p')
for t in $tests; do
  strip -o "$dest/tests/$t" "$build/tests/$t"
done
echo "$tests" >"$dest/tests.list"
# Every library ldd resolves, except glibc's own (the target's is newer) and NCCL.
ldd "$dest"/bin/* "$dest"/tests/* 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
  grep -v -E '/(libc|libm|libdl|libpthread|librt|libgcc_s)\.so|/ld-linux|/libnccl\.so' |
  while read -r lib; do cp -L "$lib" "$dest/lib/"; done
cp "$root/tools/gpu/check.sh" "$dest/"
echo "bundle.sh: $(du -sh "$dest" | cut -f1) in $dest ($(wc -w <<<"$tests") test binaries," \
  "$(ls "$dest/lib" | wc -l) libraries)"
