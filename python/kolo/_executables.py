"""The ``kolorun`` and ``kolo-timeline`` commands of a pip-installed kolo (pyproject.toml's
[project.scripts]): pip puts a script of each name in the environment's bin, and it calls one of
these, which replaces the Python process with the native program the wheel carries in
kolo/bin (cmake/KoloWheel.cmake). Only the pip install has them; a build tree or
``cmake --install`` runs the programs directly."""

import os
import sys

_BIN = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bin")


def _exec(name: str) -> None:
    path = os.path.join(_BIN, name)
    if not os.access(path, os.X_OK):
        sys.exit("%s: %s is missing or not executable; reinstall kolo (pip install "
                 "--force-reinstall --no-build-isolation <kolo's folder or sdist>)" % (name, path))
    # Flush what Python may have buffered: exec discards it.
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(path, [name] + sys.argv[1:])


def kolorun() -> None:
    _exec("kolorun")


def kolo_timeline() -> None:
    _exec("kolo-timeline")
