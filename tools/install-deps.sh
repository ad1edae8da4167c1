#!/usr/bin/env bash
# Installs the Debian 12 packages kolo needs to build and test, skipping those already present.
# With --ci, also what .ci/run's extra checks need: clang-14 with its sanitizer runtimes (the
# ASan+UBSan build, -Wthread-safety) and clang-format-14. With --torch, also a Python venv in
# .venv/torch (KOLO_TORCH_VENV overrides) holding the current torch, pybind11, pytest, mypy,
# Lightning and Accelerate from PyPI, which KOLO_WITH_TORCH=AUTO finds (README "PyTorch"; ~5.4 GB, ~1.5 min). With
# --tensorflow, also a venv in .venv/tensorflow (KOLO_TENSORFLOW_VENV overrides) holding
# tensorflow-cpu, tf-keras (Keras 2, for the tf-keras suite) and pytest from PyPI, which
# KOLO_WITH_TENSORFLOW=AUTO finds (README "TensorFlow and Keras"; ~2.2 GB, 1.5-3.5 min). With
# --engines (implies --torch), also Java 17 and a venv in .venv/engines (KOLO_ENGINES_VENV
# overrides) holding Ray (with Ray Train), pyspark and pytest from PyPI, which sees the torch
# venv's torch through a .pth file instead of downloading a second one (docs/ENGINES.md; the
# tests in tests/engines run only where it exists). Uses sudo when not run as root. Touches
# nothing else.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"

packages=(
  cmake g++ make pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libspdlog-dev catch2
  iproute2  # ip netns and tc, for kolorun's simulated multi-host test
  openmpi-bin mpich  # the launcher tests run kolo under mpirun and mpiexec
  libssl-dev openssl
)
with_torch=0
with_tensorflow=0
with_engines=0
for arg in "$@"; do
  case "$arg" in
    --ci) packages+=(clang-14 libclang-rt-14-dev clang-format-14) ;;
    --torch) with_torch=1 packages+=(python3 python3-venv python3-dev) ;;
    --tensorflow) with_tensorflow=1 packages+=(python3 python3-venv) ;;
    --engines)
      with_torch=1 with_engines=1
      packages+=(python3 python3-venv python3-dev openjdk-17-jre-headless)  # Spark runs on Java 17
      ;;
    *)
      echo "usage: tools/install-deps.sh [--ci] [--torch] [--tensorflow] [--engines]" >&2
      exit 2
      ;;
  esac
done

# A venv from PyPI: install_venv NAME VENV IMPORTS PACKAGES... Idempotent: a venv where
# `import IMPORTS` works is left as it is. PyPI's downloads do break off (CI lost a 286 MB wheel
# six times at the same byte once), so pip resumes a broken download many times, and the whole
# install is tried three times: the wheels already fetched stay in pip's cache, so a later try
# fetches only what is missing. That cache is the venv's own, beside it, and goes once the
# install succeeds: torch's wheels are ~3 GB that would otherwise stay on disk (the user's own pip
# cache is left alone).
install_venv() {
  local name=$1 venv=$2 imports=$3
  shift 3
  local cache="$venv.pip-cache"
  if [ -x "$venv/bin/python" ] && "$venv/bin/python" -c "import $imports" 2>/dev/null; then
    echo "install-deps: $name venv present in $venv"
    return
  fi
  echo "install-deps: creating the $name venv in $venv (pip: $*)"
  python3 -m venv "$venv"
  local try
  for try in 1 2 3; do
    if "$venv/bin/python" -m pip install -q --cache-dir "$cache" --upgrade pip &&
      "$venv/bin/python" -m pip install -q --cache-dir "$cache" --retries 10 --timeout 60 \
        --resume-retries 30 "$@"; then
      rm -rf "$cache"
      return
    fi
    echo "install-deps: pip failed (try $try of 3)" >&2
    if [ "$try" -lt 3 ]; then sleep $((try * 20)); fi
  done
  echo "install-deps: could not install $name from PyPI into $venv after 3 tries" >&2
  exit 1
}

# The torch venv: pip from PyPI is the one source of torch (Debian's is 1.13). mypy, pinned
# (a new mypy may find new faults), is the python_typecheck test's type checker: it reads
# torch's hints, so it lives beside torch (69 MB with its dependencies, seconds to install).
# Lightning and Accelerate are what the torch.distributed backend's framework tests run (95 MB,
# 30 s; tests/python/distributed/frameworks).
install_torch_venv() {
  install_venv torch "${KOLO_TORCH_VENV:-$repo/.venv/torch}" \
    "torch, pybind11, pytest, mypy, lightning, accelerate" \
    torch pybind11 pytest numpy mypy==2.4.1 lightning accelerate
}

# The TensorFlow venv, its own (docs/TENSORFLOW.md, "Where TensorFlow comes from"):
# tensorflow-cpu (Keras 3 comes with it), tf-keras for the Keras 2 suite, pytest.
install_tensorflow_venv() {
  install_venv tensorflow "${KOLO_TENSORFLOW_VENV:-$repo/.venv/tensorflow}" \
    "tensorflow, tf_keras, pytest" tensorflow-cpu tf-keras pytest numpy
}

# The engines venv (docs/ENGINES.md, "The engines venv"): Ray with Ray Train, and pyspark,
# pinned (the versions the tests were written against). Ray Train runs torch, and the engines
# run kolo.torch, which is built against the torch venv's torch: a .pth file in this venv puts
# the torch venv's site-packages on its sys.path (after its own), written before pip runs so
# that pip sees torch, numpy and the rest there and installs none of them again.
install_engines_venv() {
  local venv="${KOLO_ENGINES_VENV:-$repo/.venv/engines}"
  local torch_python="${KOLO_TORCH_VENV:-$repo/.venv/torch}/bin/python"
  if [ ! -x "$venv/bin/python" ]; then python3 -m venv "$venv"; fi
  local version='import sys; print("%d.%d" % sys.version_info[:2])' torch_site site
  if [ "$("$torch_python" -c "$version")" != "$("$venv/bin/python" -c "$version")" ]; then
    echo "install-deps: the engines venv's Python ($venv) is not the torch venv's version" \
      "($torch_python): they must match to share torch; remove $venv" >&2
    exit 1
  fi
  torch_site="$("$torch_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$torch_site" >"$site/kolo-torch-venv.pth"
  install_venv engines "$venv" "ray, ray.train.torch, pyspark, pytest, torch" \
    "ray[train]==2.60.0" pyspark==4.3.0 pytest
}

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
  echo "install-deps: installing ${missing[*]}"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
if [ "$with_torch" = 1 ]; then install_torch_venv; fi
if [ "$with_tensorflow" = 1 ]; then install_tensorflow_venv; fi
if [ "$with_engines" = 1 ]; then install_engines_venv; fi
