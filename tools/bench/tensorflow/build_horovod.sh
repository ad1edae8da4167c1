#!/usr/bin/env bash
# Builds Horovod 0.28.1 (Gloo, TensorFlow, CPU) against the TensorFlow of TF_PYTHON, into a cache
# outside the repository: the peer that tests/python_tf/horovod_reference.py records its
# expectations from (docs/TENSORFLOW.md, "Testing against Horovod"). Not part of kolo's build or
# CI: this script is the only place that downloads Horovod for TensorFlow.
#
#   tools/bench/tensorflow/build_horovod.sh TF_PYTHON [CACHE_DIR]
#
# CACHE_DIR defaults to ${XDG_CACHE_HOME:-~/.cache}/kolo-tf-horovod. The result is
# CACHE_DIR/hvd-venv: a venv that sees TF_PYTHON's packages through a .pth file (TensorFlow is not
# installed twice), with Horovod and its few Python dependencies on top. Prints that venv's python
# on stdout. Rebuilds only when the TensorFlow version changes. MAKEFLAGS defaults to -j2.
set -euo pipefail
tf_python="${1:?usage: build_horovod.sh TF_PYTHON [CACHE_DIR]}"
cache="${2:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-tf-horovod}"
hvd_version=0.28.1
log() { printf '[build_horovod %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

tf_site="$("$tf_python" -c 'import os, sysconfig; print(os.path.realpath(sysconfig.get_paths()["purelib"]))')"
tf_version="$(TF_CPP_MIN_LOG_LEVEL=3 "$tf_python" -c 'import tensorflow as tf; print(tf.__version__)')"
base_python="$("$tf_python" -c 'import sys; print(sys._base_executable)')"
venv="$cache/hvd-venv"
stamp="$venv/.kolo-stamp"
want="horovod=$hvd_version tensorflow=$tf_version site=$tf_site"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] &&
  TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c 'import horovod.tensorflow' 2>/dev/null; then
  log "cached: $venv ($want)"
  echo "$venv/bin/python"
  exit 0
fi

log "building Horovod $hvd_version for TensorFlow $tf_version into $venv"
rm -rf "$venv" "$cache/src"
mkdir -p "$cache/src"
"$base_python" -m venv "$venv"
venv_site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
echo "$tf_site" >"$venv_site/kolo-tf.pth"
"$venv/bin/python" -m pip install --quiet cloudpickle psutil pyyaml cffi packaging wheel setuptools
(cd "$cache/src" && "$venv/bin/python" -m pip download --quiet --no-deps --no-binary :all: \
  "horovod==$hvd_version")
tar -xzf "$cache/src/horovod-$hvd_version.tar.gz" -C "$cache/src"
src="$cache/src/horovod-$hvd_version"
# Horovod's xla_mpi_ops.cc (XLA custom calls, for GPU tensors only) includes XLA headers that
# TensorFlow >= 2.16's wheels no longer ship whole (xla/printer.h needs highwayhash/, which is not
# there) or moved (tensorflow/compiler/xla/ -> xla/): the build stops there. Its whole body sits
# under one "#if TENSORFLOW_VERSION >= 2006000000"; turning that off leaves a CPU build without
# the XLA ops and changes nothing else.
sed -i 's/^#if TENSORFLOW_VERSION >= 2006000000$/#if 0  \/\/ kolo: XLA ops off (build_horovod.sh)/' \
  "$src/horovod/tensorflow/xla_mpi_ops.cc"
grep -q "kolo: XLA ops off" "$src/horovod/tensorflow/xla_mpi_ops.cc" || {
  log "Horovod's xla_mpi_ops.cc no longer reads as expected: the XLA edit did not apply"
  exit 1
}

start=$(date +%s)
HOROVOD_WITH_TENSORFLOW=1 HOROVOD_WITH_GLOO=1 HOROVOD_WITHOUT_MPI=1 \
  HOROVOD_WITHOUT_PYTORCH=1 HOROVOD_WITHOUT_MXNET=1 HOROVOD_CPU_OPERATIONS=GLOO \
  MAKEFLAGS="${MAKEFLAGS:--j2}" "$venv/bin/python" -m pip install --no-build-isolation \
  --no-cache-dir -v "$src" >"$cache/build.log" 2>&1 || {
  log "pip install failed: see $cache/build.log"
  exit 1
}
log "built in $(($(date +%s) - start)) s"
TF_CPP_MIN_LOG_LEVEL=3 "$venv/bin/python" -c \
  'import horovod, horovod.tensorflow; print("horovod", horovod.__version__)' >&2
echo "$want" >"$stamp"
echo "$venv/bin/python"
