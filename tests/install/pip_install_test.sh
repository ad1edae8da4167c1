#!/usr/bin/env bash
# ctest's install_pip (tests/install/CMakeLists.txt): kolo as a pip user gets it, proven from the
# already-built tree within CI's time. CI is a fresh 2-core machine without ccache, where a real
# `pip install .` would compile kolo a second time (about 10 minutes); so this test compiles
# nothing. It lays the wheel's files out with the same install rules the pip build runs
# (`cmake --install <build> --component kolo_wheel`: cmake/KoloWheel.cmake), packs them with the
# metadata of pyproject.toml (make_wheel.py), and then does what a user does: installs the wheel
# with pip (--no-index --only-binary: nothing may compile) into a fresh venv that sees the torch
# venv's torch through a .pth file (and into a second one that sees the TensorFlow venv's), and
# from an empty folder, without PYTHONPATH or LD_LIBRARY_PATH, runs
#   <venv>/bin/kolorun -np 2 <venv>/bin/python train_torch.py       (import kolo.torch as hvd)
#   <venv>/bin/kolorun -np 2 <venv>/bin/python torch_backend.py     (init_process_group("kolo")
#                                                                    without importing kolo)
#   <venv>/bin/kolorun -np 2 <venv>/bin/python train_tensorflow.py  (import kolo.tensorflow)
# then `pip uninstall kolo` and compares the venv's files with those before the install. 26 s on
# a 2-core AMD EPYC at load 2 (90 s at load 11), most of it importing torch and TensorFlow; it
# needs nothing CI lacks (no scikit-build-core: pip comes from the framework venvs). What it
# leaves to the by-hand check of README "Install into your venv with pip": scikit-build-core
# running CMake itself.
# Usage: pip_install_test.sh <build dir> <source dir> <cmake> <torch python or ""> <tf python or "">
# Prints "pip_install_test: FAIL: <what>" and exits 1 on the first thing that is wrong.
set -euo pipefail

build=$1 source=$2 cmake=$3 torch_python=$4 tf_python=$5
here=$source/tests/install
work=$(mktemp -d "${TMPDIR:-/tmp}/kolo-pip-test.XXXXXX")
trap 'rm -rf "$work"' EXIT

fail() {
  echo "pip_install_test: FAIL: $*" >&2
  exit 1
}
step() { echo "pip_install_test: $*"; }
run_logged() {
  local what=$1 log=$2
  shift 2
  if ! "$@" >"$log" 2>&1; then
    cat "$log" >&2
    fail "$what (command: $*)"
  fi
}

[ -n "$torch_python$tf_python" ] || fail "neither a torch nor a TensorFlow Python was given"

step "laying out the wheel's files from $build (component kolo_wheel)"
stage=$work/stage
run_logged "cmake --install --component kolo_wheel of $build (was the tree built?)" \
  "$work/install.log" "$cmake" --install "$build" --component kolo_wheel --prefix "$stage" --strip
for f in kolo/__init__.py kolo/_executables.py kolo/common/basics.py kolo/lib/libkolo.so.0 \
  kolo/bin/kolorun kolo/bin/kolo-timeline; do
  [ -e "$stage/$f" ] || fail "the wheel has no $f"
done
[ ! -L "$stage/kolo/lib/libkolo.so.0" ] || fail "kolo/lib/libkolo.so.0 is a symlink"
others=$(cd "$stage" && find kolo/lib kolo/bin -type f | sort | tr '\n' ' ')
[ "$others" = "kolo/bin/kolo-timeline kolo/bin/kolorun kolo/lib/libkolo.so.0 " ] ||
  fail "kolo/lib and kolo/bin should hold libkolo.so.0, kolorun and kolo-timeline only: $others"
[ -z "$(cd "$stage" && ls -d ./*.dist-info 2>/dev/null)" ] ||
  fail "the component installs a dist-info of its own (pip writes the wheel's)"
if [ -n "$torch_python" ]; then
  module=$(ls "$stage"/kolo/torch/_C*.so 2>/dev/null) || fail "the wheel has no kolo/torch/_C*.so"
  # shellcheck disable=SC2016  # a literal $ORIGIN
  readelf -d "$module" | grep -q 'RUNPATH.*\$ORIGIN/\.\./lib' ||
    fail "kolo/torch/_C has no RUNPATH \$ORIGIN/../lib: $(readelf -d "$module" | grep -i path)"
fi
if [ -n "$tf_python" ]; then
  [ -e "$stage/kolo/tensorflow/_kolo_ops.so" ] ||
    fail "the wheel has no kolo/tensorflow/_kolo_ops.so"
  libkolo_py=$stage/kolo/tensorflow/_libkolo.py
  grep -qx 'LIBKOLO = "../lib/libkolo.so.0"' "$libkolo_py" ||
    fail "kolo/tensorflow/_libkolo.py does not name ../lib/libkolo.so.0: $(cat "$libkolo_py")"
fi
# Every file of python/kolo is in the wheel, those of a binding not built aside: a module left
# out of the CMake lists would be missing from pip users' kolo.
missing=""
while IFS= read -r f; do
  case "$f" in
    kolo/torch/*) [ -n "$torch_python" ] || continue ;;
    kolo/tensorflow/* | kolo/keras/*) [ -n "$tf_python" ] || continue ;;
  esac
  [ -e "$stage/$f" ] || missing="$missing $f"
done < <(cd "$source/python" && find kolo -name '*.py' -o -name '*.pyi' -o -name py.typed | sort)
[ -z "$missing" ] || fail "python/kolo files missing from the wheel (add them to the lists of" \
  "python/CMakeLists.txt, python/tensorflow/CMakeLists.txt or python/common_files.cmake):$missing"
for program in kolorun kolo-timeline; do
  missing=$(env -u LD_LIBRARY_PATH ldd "$stage/kolo/bin/$program" | grep 'not found' || true)
  [ -z "$missing" ] || fail "kolo/bin/$program misses libraries: $missing"
done


# try_job <venv> <log name> <script> <expected line prefix>: runs the script as 2 ranks under
# the venv's kolorun from an empty folder, with neither PYTHONPATH nor LD_LIBRARY_PATH.
try_job() {
  local venv=$1 name=$2 script=$3 prefix=$4 out
  mkdir -p "$work/run-$name"
  cp "$here/pip_jobs/$script" "$work/run-$name/"
  out=$(cd "$work/run-$name" && timeout 240 env -u PYTHONPATH -u LD_LIBRARY_PATH -u PYTHONHOME \
    "$venv/bin/kolorun" -np 2 "$venv/bin/python" "$script" 2>&1) ||
    fail "$venv/bin/kolorun -np 2 $venv/bin/python $script failed: $out"
  for r in 0 1; do
    grep -q "^\[$r\].*$prefix: rank $r of 2 ok" <<<"$out" ||
      fail "rank $r of $script did not print '$prefix: rank $r of 2 ok'; kolorun printed: $out"
  done
  if grep -q "kolo from" <<<"$out" && grep "kolo from" <<<"$out" | grep -vq "kolo from $venv/"; then
    fail "$script imported kolo from outside $venv: $out"
  fi
  step "$name: $(grep -m1 "^\[0\].*$prefix: rank 0" <<<"$out")"
}

# check_venv <name> <framework python> <jobs...>: a fresh venv that sees the framework's venv
# through a .pth file, the wheel installed with pip (the framework venv's pip, which the .pth
# makes importable too), the jobs run, the wheel uninstalled, and nothing left behind.
check_venv() {
  local name=$1 framework_python=$2
  shift 2
  local venv=$work/venv-$name site framework_site wheel
  # Packed by the venv's Python, whose tag the wheel gets (make_wheel.py needs 3.11+: tomllib).
  mkdir "$work/dist-$name"
  wheel=$("$framework_python" "$here/make_wheel.py" "$stage" "$source/pyproject.toml" \
    "$source/CMakeLists.txt" "$work/dist-$name") || fail "make_wheel.py failed"
  step "$name: packed $(basename "$wheel"), $(du -k "$wheel" | cut -f1) KiB"
  step "$name: a venv seeing $framework_python's packages"
  run_logged "creating the $name venv" "$work/venv-$name.log" \
    "$framework_python" -m venv --without-pip "$venv"
  local purelib='import sysconfig; print(sysconfig.get_paths()["purelib"])'
  site=$("$venv/bin/python" -c "$purelib")
  framework_site=$("$framework_python" -c "$purelib")
  echo "$framework_site" >"$site/_kolo_test_framework.pth"
  (cd "$venv" && find . | sort) >"$work/before-$name.txt"

  run_logged "pip install of the wheel into the $name venv" "$work/pip-$name.log" \
    env -u PYTHONPATH "$venv/bin/python" -m pip install --no-index --no-deps --only-binary :all: \
    --disable-pip-version-check "$wheel"
  for program in kolorun kolo-timeline; do
    [ -x "$venv/bin/$program" ] || fail "pip put no $program in $venv/bin"
  done
  "$venv/bin/kolo-timeline" --help >"$work/timeline-help.txt" 2>&1 ||
    fail "$venv/bin/kolo-timeline --help failed: $(cat "$work/timeline-help.txt")"
  while [ $# -gt 0 ]; do
    try_job "$venv" "$name-${1%.py}" "$1" "$2"
    shift 2
  done

  run_logged "pip uninstall kolo in the $name venv" "$work/uninstall-$name.log" \
    env -u PYTHONPATH "$venv/bin/python" -m pip uninstall -y --disable-pip-version-check kolo
  (cd "$venv" && find . | sort) >"$work/after-$name.txt"
  if ! diff "$work/before-$name.txt" "$work/after-$name.txt" >"$work/left-$name.txt"; then
    fail "pip uninstall kolo left the $name venv other than before the install:" \
      "$(cat "$work/left-$name.txt")"
  fi
  step "$name: uninstalled, nothing left behind"
}

if [ -n "$torch_python" ]; then
  check_venv torch "$torch_python" train_torch.py train_torch torch_backend.py torch_backend
fi
if [ -n "$tf_python" ]; then
  check_venv tensorflow "$tf_python" train_tensorflow.py train_tensorflow
fi
step "ok: the wheel installs without compiling, runs its jobs from the venv, and uninstalls clean"
