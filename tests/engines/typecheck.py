"""mypy over kolo.ray, kolo.spark and kolo._engine with python/mypy.ini, from the sources in
PYTHON_DIR (engines_typecheck). Slow (about a minute reading Ray's and pyspark's hints): exits
77 (skipped) unless TEST_ENGINES_SLOW=1, and 77 where the interpreter has no mypy.

    python typecheck.py PYTHON_DIR CACHE_DIR
"""

import importlib.util
import os
import subprocess
import sys


def main():
    python_dir, cache_dir = sys.argv[1], sys.argv[2]
    if os.environ.get("TEST_ENGINES_SLOW") != "1":
        print("engines typecheck: skipped (slow): set TEST_ENGINES_SLOW=1")
        return 77
    if importlib.util.find_spec("mypy") is None:
        print("engines typecheck: skipped: no mypy in %s (tools/install-deps.sh --torch "
              "installs it in the torch venv, which the engines venv sees)" % sys.executable)
        return 77
    return subprocess.call([sys.executable, "-m", "mypy", "--config-file",
                            os.path.join(python_dir, "mypy.ini"), "--cache-dir", cache_dir,
                            "-p", "kolo._engine", "-p", "kolo.ray", "-p", "kolo.spark"],
                           cwd=python_dir)


if __name__ == "__main__":
    sys.exit(main())
