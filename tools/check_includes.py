#!/usr/bin/env python3
"""Checks that kolo's #include "…" lines follow the allowed directions between folders
(docs/DESIGN-NOTES.md, "Layout"). Run by ctest as `include_directions` (label `lint`).

Usage: tools/check_includes.py [SOURCE_ROOT]   (default: the checkout this script is in)

Every quoted include in the C/C++ files of the folders below is classified by the folder of
the including file and the folder of the included path; an include that crosses into a folder
not listed for its own is an error, printed as "file:line: rule". Also errors: an include
with "../" or "./" (STYLE.md: includes from the repository root), an include of a project path
that does not exist, and a source folder that has no rule (a new folder must say where it
sits), and an include of the runtime's public API (runtime/include/kolo: kolo/kolo.h and the
other headers whose functions live in runtime/) from a folder below the runtime, the public
headers of core/include among them. Angle-bracket includes (system and third-party headers) are
not checked.
Exit status: 0 clean, 1 violations, 2 usage error. Standard library only.
"""
import os
import re
import sys

# Folder -> folders whose headers it may include (besides its own). A file belongs to the
# longest folder that prefixes its path. "kolo" is the public API (core/include/kolo, the types
# kolo's insides share with it, which every folder may include; runtime/include/kolo, the
# runtime's API: see RUNTIME_API); "proto" is the code generated from proto/kolo.proto.
LAYERED = {
    "core/include": set(),  # the shared public headers: kolo/ only (checked below)
    "runtime/include": set(),  # the runtime's public headers: kolo/ only
    "core": set(),
    "core/config": {"core"},
    "core/timeline": {"core"},
    "core/fusion": {"core"},
    "core/loop": {"core", "core/config", "core/timeline", "core/fusion"},
    "controller": {"core", "core/config", "core/fusion"},
    "ops": {"core", "core/fusion"},
    "ops/gpu": {"core", "core/config", "core/fusion"},
    "ops/cuda": {"core", "ops/gpu"},
    "ops/nccl": {"core", "ops/gpu"},
    "ops/gpu_plane": {"core", "core/config", "ops", "ops/gpu", "ops/cuda", "ops/nccl"},
    "transport": {"core"},
    "transport/auth": {"core", "transport"},
    "transport/tcp": {"core", "core/config", "transport", "transport/auth"},
    "transport/shm": {"core", "core/config", "transport"},
    "transport/grpc": {"core", "transport", "transport/auth", "proto"},
    "transport/local": {"core"},
    "transport/p2p": {"core", "transport", "transport/shm"},
    "runtime": {"core", "core/config", "core/timeline", "core/fusion", "core/loop", "controller",
                "ops", "ops/gpu", "ops/cuda", "ops/nccl", "ops/gpu_plane",
                "transport", "transport/auth", "transport/tcp", "transport/shm",
                "transport/grpc", "transport/local", "transport/p2p"},
    "proto": set(),
    # kolorun: a program on core/'s parts and the elastic rendezvous it serves; no runtime.
    "launcher": {"core", "core/config", "transport/grpc"},
    # Programs on the public API only.
    "examples": set(),
    # kolo.torch's native module and kolo::libtorch: the public API only (they link libkolo.so).
    "python": set(),
    "libtorch": set(),
}
# Folders whose files may include anything of the project (they test or drive its insides).
UNRESTRICTED = ("tests", "tools", "fuzz")
# Folders listed in LAYERED whose sub-folders inherit their rule instead of needing their own.
INHERITED = ("examples", "core/include", "runtime/include", "python", "libtorch")
# The public headers of the runtime's API (runtime/include/kolo: kolo.h, handle.h,
# gradient_sync.h, c_api.h): their functions are defined in runtime/, so a folder below it that
# included one would point back up at the composition root. Only the runtime (its headers
# included) and the programs on the public API (and, as everywhere, tests, tools and fuzz)
# include them; the rest of kolo, core/include's headers too, takes the types it shares with
# the API from kolo/op_args.h, kolo/types.h, kolo/status.h and kolo/options.h.
PUBLIC_HEADER_DIRS = ("core/include", "runtime/include")
RUNTIME_API_DIR = "runtime/include"
RUNTIME_API_USERS = {"runtime", "runtime/include", "examples", "python", "libtorch"}
# Paths that exist only in the build tree (generated).
GENERATED = {"kolo/version.h", "proto/kolo.pb.h", "proto/kolo.grpc.pb.h"}

SOURCE_EXTS = (".h", ".hpp", ".cc", ".cpp", ".c")
SKIP_DIRS = {"fuzz/corpus", "tests/tools/data", "examples/data"}
INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"')
TOP_FOLDERS = sorted({f.split("/")[0] for f in LAYERED} | set(UNRESTRICTED))
# Why a rule exists, added to its message: by including folder, then by included folder.
WHY = {
    "core": "core/ depends on nothing else in the project",
    "examples": "examples/ use kolo's public API only",
    "launcher": "kolorun starts ranks; it runs none, so it needs no runtime",
    "python": "kolo.torch links libkolo.so, whose interface is the public API",
    "libtorch": "kolo::libtorch links libkolo.so, whose interface is the public API",
    "core/include": "the installed headers must not need kolo's sources",
    "runtime/include": "the installed headers must not need kolo's sources",
}
WHY_TARGET = {
    "proto": "generated protobuf types stay behind transport/grpc",
    "controller": "controller/ decides and meets the others through core/'s interfaces",
    "ops": "ops/ executes and meets the others through core/'s interfaces",
    "runtime": "runtime/ is the composition root; nothing below it depends on it",
}


def folder_of(path):
    """The folder (a key of LAYERED or an UNRESTRICTED top folder) that `path` belongs to."""
    if path.startswith("kolo/"):
        return "kolo"
    best = None
    for folder in list(LAYERED) + list(UNRESTRICTED):
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best):
                best = folder
    return best


_RUNTIME_API = {}  # by source root


def runtime_api_of(root):
    """The include paths ("kolo/kolo.h", ...) of the runtime's public headers under `root`."""
    if root not in _RUNTIME_API:
        folder = os.path.join(root, RUNTIME_API_DIR, "kolo")
        names = os.listdir(folder) if os.path.isdir(folder) else []
        _RUNTIME_API[root] = {"kolo/" + name for name in names if name.endswith(".h")}
    return _RUNTIME_API[root]


def rule_text(folder, there):
    allowed = sorted(LAYERED[folder] | {folder}) + ["kolo"]
    if folder in PUBLIC_HEADER_DIRS:
        allowed = ["kolo"]
    text = f"{folder}/ may include only " + ", ".join(f"{a}/" for a in allowed)
    why = WHY.get(folder) or WHY_TARGET.get(there)
    return text + (f" ({why})" if why else "")


def check_file(root, rel, errors):
    here = folder_of(rel)
    with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as f:
        lines = f.readlines()
    for number, line in enumerate(lines, 1):
        m = INCLUDE.match(line)
        if not m:
            continue
        target = m.group(1)
        where = f"{rel}:{number}"
        if target.startswith(("../", "./")) or "/../" in target:
            errors.append(f'{where}: "{target}": include from the repository root, never '
                          f'relative (STYLE.md)')
            continue
        there = folder_of(target)
        if there is None:
            continue  # not a project path (a third-party header included with quotes)
        if there == "kolo":
            exists = any(os.path.exists(os.path.join(root, d, target))
                         for d in PUBLIC_HEADER_DIRS)
        else:
            exists = os.path.exists(os.path.join(root, target))
        if not exists and target not in GENERATED:
            errors.append(f'{where}: "{target}": no such file in the source tree')
            continue
        if here in UNRESTRICTED or there == here:
            continue
        runtime_api = runtime_api_of(root)
        if target in runtime_api and here not in RUNTIME_API_USERS:
            errors.append(f'{where}: "{target}": {here}/ may not include the runtime\'s public '
                          f'API ({", ".join(sorted(runtime_api))}), whose functions live in '
                          f'runtime/; take Callback, Allocator and AllreduceOptions from '
                          f'kolo/op_args.h')
            continue
        if here in PUBLIC_HEADER_DIRS:
            if there != "kolo":
                errors.append(f'{where}: "{target}": {rule_text(here, there)}')
            continue
        if there == "kolo":
            continue
        if there not in LAYERED[here]:
            errors.append(f'{where}: "{target}": {rule_text(here, there)}')


def main(argv):
    if len(argv) > 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(argv[1] if len(argv) == 2 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    if not os.path.isdir(os.path.join(root, "core")):
        print(f"check_includes: {root} is not kolo's source root", file=sys.stderr)
        return 2
    errors = []
    checked = 0
    for top in TOP_FOLDERS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            rel_dir = os.path.relpath(dirpath, root)
            dirnames[:] = sorted(d for d in dirnames
                                 if os.path.join(rel_dir, d) not in SKIP_DIRS
                                 and not d.startswith("."))
            sources = sorted(f for f in filenames if f.endswith(SOURCE_EXTS))
            if not sources:
                continue
            owner = folder_of(rel_dir)
            if (owner in LAYERED and owner != rel_dir
                    and not any(owner == i or owner.startswith(i + "/") for i in INHERITED)):
                errors.append(f"{rel_dir}/: a source folder without a rule of its own in "
                              f"tools/check_includes.py (LAYERED) and docs/DESIGN-NOTES.md")
            for name in sources:
                check_file(root, os.path.join(rel_dir, name), errors)
                checked += 1
    for error in errors:
        print(error)
    if errors:
        print(f"check_includes: {len(errors)} include(s) against the layout rules "
              f"(docs/DESIGN-NOTES.md, \"Layout\") in {checked} files")
        return 1
    print(f"check_includes: {checked} files follow the layout rules")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
