"""Runs mypy over kolo.torch, kolo.common, kolo.data, kolo.runner, kolo.tensorflow and
kolo.keras with python/mypy.ini: every function there has type hints, and mypy checks the code
against them and against torch's and numpy's own (TensorFlow and Keras have none: their names
are Any).

    typecheck.py <source root> <cache dir>

mypy runs in this interpreter (`python -m mypy`): CI's is the torch venv, where
tools/install-deps.sh --torch installs the pinned mypy beside torch, which mypy needs to read
torch's hints. Without mypy, exits 77 (ctest's SKIP_RETURN_CODE) saying what to install.
"""

import importlib.util
import os
import subprocess
import sys
import time

SKIP = 77
PACKAGES = ["kolo.torch", "kolo.common", "kolo.data", "kolo.runner", "kolo.tensorflow", "kolo.keras"]


def main():
    if len(sys.argv) != 3:
        print("usage: typecheck.py <source root> <cache dir>", file=sys.stderr)
        return 2
    source_root, cache_dir = sys.argv[1:]
    if importlib.util.find_spec("mypy") is None:
        print("typecheck: skipped: mypy is not installed in %s; tools/install-deps.sh --torch "
              "installs it into the torch venv (or: %s -m pip install mypy)"
              % (sys.executable, sys.executable))
        return SKIP
    python_dir = os.path.join(source_root, "python")
    command = [sys.executable, "-m", "mypy", "--config-file",
               os.path.join(python_dir, "mypy.ini"), "--cache-dir", cache_dir]
    for package in PACKAGES:
        command += ["-p", package]
    # The sources, not the build tree: mypy reads kolo/torch/_C.pyi for the native module.
    env = dict(os.environ, MYPYPATH=python_dir)
    env.pop("PYTHONPATH", None)
    version = subprocess.run([sys.executable, "-m", "mypy", "--version"], env=env,
                             capture_output=True, text=True).stdout.strip()
    start = time.monotonic()
    result = subprocess.run(command, cwd=python_dir, env=env)
    print("typecheck: %s over %s took %.1f s" % (version, ", ".join(PACKAGES),
                                                time.monotonic() - start))
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
