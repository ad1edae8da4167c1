"""Where the kolorun program is, for the elastic executors that run its elastic driver, however
kolo was installed: KOLORUN_PATH; a pip install's kolo/bin (cmake/KoloWheel.cmake); the CMake
build tree this package was copied into (build/python/kolo beside build/bin); `cmake --install`'s
prefix (PREFIX/lib/pythonX.Y/site-packages/kolo beside PREFIX/bin); the folder of this Python;
PATH.

Threading: a plain function.
"""

from __future__ import annotations

import os
import shutil
import sys


def _candidates() -> list[str]:
    """The places kolorun may be, most specific first."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # .../kolo
    root = os.path.dirname(package)  # build/python, or site-packages
    places = [os.path.join(package, "bin", "kolorun"),
              os.path.join(os.path.dirname(root), "bin", "kolorun")]
    parts = root.split(os.sep)
    if len(parts) > 3 and parts[-1] == "site-packages":  # PREFIX/lib/pythonX.Y/site-packages
        places.append(os.path.join(os.sep.join(parts[:-3]), "bin", "kolorun"))
    places.append(os.path.join(os.path.dirname(sys.executable), "kolorun"))
    return places


def kolorun() -> str:
    """The path of kolorun. Raises FileNotFoundError naming the places looked at."""
    chosen = os.environ.get("KOLORUN_PATH")
    if chosen:
        if not os.access(chosen, os.X_OK):
            raise FileNotFoundError("KOLORUN_PATH=%s is not an executable file" % chosen)
        return chosen
    places = _candidates()
    for place in places:
        if os.path.isfile(place) and os.access(place, os.X_OK):
            return place
    found = shutil.which("kolorun")
    if found:
        return found
    raise FileNotFoundError(
        "kolo: cannot find the kolorun program, which runs the elastic driver; looked at %s and "
        "PATH. Set KOLORUN_PATH to its path" % ", ".join(places))
