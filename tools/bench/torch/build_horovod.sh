#!/usr/bin/env bash
# Builds Horovod 0.28.1 (Gloo, PyTorch, CPU) against the torch that kolo.torch was built with,
# into a cache outside the repository, so that the side-by-side race compares both libraries on
# the very same torch. Nothing here is part of kolo's build: this script is the only place that
# downloads Horovod.
#
#   tools/bench/torch/build_horovod.sh TORCH_PYTHON [CACHE_DIR]
#
# TORCH_PYTHON is the python of the venv that holds torch (kolo's is .venv/torch/bin/python).
# CACHE_DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/kolo-race. The result is CACHE_DIR/hvd-venv:
# a venv whose site-packages sees the torch venv's packages through a .pth file (so torch is not
# installed twice), with Horovod and its few Python dependencies on top. Prints that venv's
# python on stdout. Rebuilds only when the torch version changes. ~3-5 min on 2 cores.
#
# Torch >= 2.1 headers need C++20; Horovod 0.28.1 asks for C++14 in two CMakeLists, which this
# script edits in the unpacked sdist (see ../shared/notes/torch.md).
set -euo pipefail
torch_python="${1:?usage: build_horovod.sh TORCH_PYTHON [CACHE_DIR]}"
cache="${2:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-race}"
hvd_version=0.28.1
log() { printf '[build_horovod %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

torch_site="$("$torch_python" -c 'import os, sysconfig; print(os.path.realpath(sysconfig.get_paths()["purelib"]))')"
torch_version="$("$torch_python" -c 'import torch; print(torch.__version__)')"
base_python="$("$torch_python" -c 'import sys; print(sys._base_executable)')"
venv="$cache/hvd-venv"
stamp="$venv/.kolo-race-stamp"
want="horovod=$hvd_version torch=$torch_version site=$torch_site"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  "$venv/bin/python" -c 'import horovod.torch' 2>/dev/null; then
  log "cached: $venv ($want)"
  echo "$venv/bin/python"
  exit 0
fi

log "building Horovod $hvd_version for torch $torch_version into $venv"
rm -rf "$venv" "$cache/src"
mkdir -p "$cache/src"
"$base_python" -m venv "$venv"
venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
# Appended after the venv's own site-packages: the torch venv's packages (torch, numpy) are
# visible, and what pip installs here comes first.
echo "$torch_site" >"$venv_site/kolo-race-torch.pth"
"$venv/bin/python" -c 'import torch' || {
  log "the new venv cannot import torch from $torch_site"
  exit 1
}

# Horovod's runtime dependencies (horovodrun) and its build's (cmake comes from the system:
# a pip cmake 4.x refuses Horovod's third-party trees).
"$venv/bin/python" -m pip install --quiet cloudpickle psutil pyyaml cffi packaging wheel setuptools
(cd "$cache/src" && "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
  "horovod==$hvd_version")
tar -xzf "$cache/src/horovod-$hvd_version.tar.gz" -C "$cache/src"
src="$cache/src/horovod-$hvd_version"
sed -i 's/set(CMAKE_CXX_STANDARD 14)/set(CMAKE_CXX_STANDARD 20)/' \
  "$src/CMakeLists.txt" "$src/horovod/torch/CMakeLists.txt"
grep -q 'CMAKE_CXX_STANDARD 20' "$src/horovod/torch/CMakeLists.txt" || {
  log "Horovod's CMakeLists no longer reads as expected: the C++20 edit did not apply"
  exit 1
}

start=$(date +%s)
HOROVOD_WITH_PYTORCH=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_TENSORFLOW=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS="-j$(nproc)" "$venv/bin/python" -m pip install --no-build-isolation --no-cache-dir \
  --quiet "$src" >&2
log "built in $(($(date +%s) - start)) s"
"$venv/bin/python" -c 'import horovod, horovod.torch; print("horovod", horovod.__version__)' >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
