#!/usr/bin/env bash
# ctest's install_package (tests/install/CMakeLists.txt): installs a built kolo tree into a
# temporary prefix and uses it as an outside program would. Builds nothing of kolo itself.
# Usage: install_test.sh <build dir> <libdir, e.g. lib> <this folder> <cmake> <cc> <c++>
# Prints "install_test: FAIL: <what>" and exits 1 on the first thing that is wrong.
set -euo pipefail

build=$1 libdir=$2 here=$3 cmake=$4 cc=$5 cxx=$6
work=$(mktemp -d "${TMPDIR:-/tmp}/kolo-install-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() {
  echo "install_test: FAIL: $*" >&2
  exit 1
}
step() { echo "install_test: $*"; }

# Runs a command with output to <log>; on failure, shows the log and fails with <what>.
run_logged() {
  local what=$1 log=$2
  shift 2
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what (command: $*)"
  fi
}

step "installing $build into $prefix"
run_logged "cmake --install of $build (was the tree built?)" "$work/install.log" \
  "$cmake" --install "$build" --prefix "$prefix"

version=$(sed -n 's/^#define KOLO_VERSION_STRING "\(.*\)"$/\1/p' \
  "$prefix/include/kolo/version.h" 2>/dev/null) || true
[ -n "$version" ] || fail "no KOLO_VERSION_STRING in $prefix/include/kolo/version.h"
major=${version%%.*}

step "checking the layout of kolo $version"
for f in include/kolo/kolo.h include/kolo/c_api.h include/kolo/version.h \
  "$libdir/libkolo.so.$version" "$libdir/libkolo.so.$major" "$libdir/libkolo.so" \
  bin/kolorun bin/kolo-bench bin/kolo-timeline \
  "$libdir/cmake/kolo/koloConfig.cmake" "$libdir/cmake/kolo/koloConfigVersion.cmake" \
  "$libdir/cmake/kolo/koloTargets.cmake" "$libdir/pkgconfig/kolo.pc"; do
  [ -e "$prefix/$f" ] || fail "the install has no $f"
done
[ ! -e "$prefix/$libdir/libkolo.a" ] || fail "the static libkolo.a was installed"
soname=$(readelf -d "$prefix/$libdir/libkolo.so.$version" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
[ "$soname" = "libkolo.so.$major" ] || fail "libkolo.so's SONAME is '$soname', not libkolo.so.$major"

step "checking that gRPC, protobuf and spdlog stay private"
if leaks=$(grep -rnE '#[[:space:]]*include[[:space:]]*[<"](grpc|grpcpp|google/protobuf|spdlog|core/|transport/|controller/|ops/|proto/|runtime/)' \
  "$prefix/include"); then
  fail "a public header includes a private dependency or an internal header: $leaks"
fi
# (IMPORTED_LINK_DEPENDENT_LIBRARIES may name them: CMake only uses it for -rpath-link, and
# ignores names a consumer has not defined; the consumer below checks that.)
if leaks=$(grep -nEi '^[^#]*(find_dependency|find_package|INTERFACE_LINK_LIBRARIES.*(grpc|protobuf|spdlog))' \
  "$prefix/$libdir"/cmake/kolo/*.cmake); then
  fail "the CMake package needs a private dependency: $leaks"
fi
if leaks=$(grep -nEi 'grpc|protobuf|spdlog' "$prefix/$libdir/pkgconfig/kolo.pc"); then
  fail "kolo.pc names a private dependency: $leaks"
fi

step "checking that libkolo.so exports kolo's public API only"
nm -D --defined-only "$prefix/$libdir/libkolo.so.$version" | awk '{print $NF}' | c++filt \
  >"$work/exports.txt"
grep -q '^kolo_allreduce_async$' "$work/exports.txt" || fail "kolo_allreduce_async is not exported"
grep -q '^kolo::init_for_version(int)$' "$work/exports.txt" ||
  fail "kolo::init_for_version(int) is not exported"
if others=$(grep -vE '^(kolo_|kolo::)' "$work/exports.txt"); then
  fail "libkolo.so exports symbols that are not kolo's API: $(echo "$others" | head -5)"
fi
if others=$(grep -E '^kolo::(controller|transport|ops|timeline|launcher)::|BackgroundLoop|TcpMesh' \
  "$work/exports.txt"); then
  fail "libkolo.so exports kolo internals: $(echo "$others" | head -5)"
fi

step "building the C++ consumer with find_package(kolo) (gRPC, protobuf, spdlog disabled)"
run_logged "configuring the find_package(kolo) consumer" "$work/cxx-configure.log" \
  "$cmake" -S "$here/consumer_cxx" -B "$work/cxx" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_DISABLE_FIND_PACKAGE_gRPC=ON -DCMAKE_DISABLE_FIND_PACKAGE_Protobuf=ON \
  -DCMAKE_DISABLE_FIND_PACKAGE_spdlog=ON
run_logged "building the find_package(kolo) consumer" "$work/cxx-build.log" \
  "$cmake" --build "$work/cxx"
out=$(env -u LD_LIBRARY_PATH "$work/cxx/consumer_cxx" 2>&1) || fail "consumer_cxx failed: $out"
expected="cxx consumer: library $version headers $version rank 0 of 1 values 3 4 6"
[ "$out" = "$expected" ] || fail "consumer_cxx printed '$out', expected '$expected'"

step "building the C consumer with pkg-config as C99"
export PKG_CONFIG_PATH=$prefix/$libdir/pkgconfig
flags=$(pkg-config --cflags --libs kolo) || fail "pkg-config --cflags --libs kolo failed"
pc_version=$(pkg-config --modversion kolo)
[ "$pc_version" = "$version" ] || fail "kolo.pc says version $pc_version, not $version"
# shellcheck disable=SC2086  # the flags are words
run_logged "compiling the pkg-config consumer" "$work/c-build.log" \
  "$cc" -std=c99 -pedantic -Wall -Wextra -Werror "$here/consumer_c/consumer.c" -o "$work/consumer_c" $flags
export LD_LIBRARY_PATH=$prefix/$libdir
out=$("$work/consumer_c" 2>&1) || fail "consumer_c failed: $out"
expected="c consumer: library $version headers $version rank 0 of 1 values 1 2 3 4"
[ "$out" = "$expected" ] || fail "consumer_c printed '$out', expected '$expected'"

step "running the C consumer as 2 ranks under the installed kolorun"
out=$("$prefix/bin/kolorun" -np 2 "$work/consumer_c" 2>&1) || fail "kolorun -np 2 consumer_c failed: $out"
for r in 0 1; do
  line="c consumer: library $version headers $version rank $r of 2 values 2 4 6 8"
  grep -qF "$line" <<<"$out" || fail "rank $r did not print '$line'; kolorun printed: $out"
done

step "ok: kolo $version installs and links from C++ (find_package) and C (pkg-config)"
