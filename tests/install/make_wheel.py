"""Packs a folder laid out by `cmake --install <build> --component kolo_wheel` into a wheel, with
the metadata pyproject.toml gives the pip build (name, version by the same regex, dependencies,
[project.scripts], [project.entry-points]), tagged for the Python that runs this. Used by
pip_install_test.sh, so that the pip path is tested from the already-built tree: what
scikit-build-core adds over this is running CMake, which the test does not repeat.

Usage: python3 make_wheel.py <staged folder> <pyproject.toml> <CMakeLists.txt> <output folder>
Prints the wheel's path. Needs Python 3.11+ (tomllib).
"""

import base64
import hashlib
import os
import re
import sys
import sysconfig
import zipfile

try:
    import tomllib
except ImportError:  # Python < 3.11
    sys.exit("make_wheel.py needs Python 3.11 or newer (tomllib); this is %s" % sys.version)


def version_from(pyproject, cmakelists):
    spec = pyproject["tool"]["scikit-build"]["metadata"]["version"]
    with open(cmakelists, encoding="utf-8") as f:
        match = re.search(spec["regex"], f.read())
    if not match:
        sys.exit("make_wheel.py: pyproject.toml's version regex finds nothing in %s" % cmakelists)
    return match.group("value")


def metadata(project, version):
    lines = ["Metadata-Version: 2.1", "Name: " + project["name"], "Version: " + version]
    if "requires-python" in project:
        lines.append("Requires-Python: " + project["requires-python"])
    lines += ["Requires-Dist: " + dep for dep in project.get("dependencies", [])]
    return "\n".join(lines) + "\n"


def entry_points(project):
    groups = {"console_scripts": project.get("scripts", {})}
    groups.update(project.get("entry-points", {}))
    text = ""
    for group, entries in groups.items():
        text += "[%s]\n" % group + "".join("%s = %s\n" % kv for kv in entries.items()) + "\n"
    return text


def tag():
    python = "cp%d%d" % sys.version_info[:2]
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return "%s-%s-%s" % (python, python, platform)


def record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def main():
    if len(sys.argv) != 5:
        sys.exit(__doc__)
    staged, pyproject_path, cmakelists, out_dir = sys.argv[1:]
    with open(pyproject_path, "rb") as f:
        pyproject = tomllib.load(f)
    project = pyproject["project"]
    version = version_from(pyproject, cmakelists)
    name = project["name"]
    dist_info = "%s-%s.dist-info" % (name, version)
    wheel_path = os.path.join(out_dir, "%s-%s-%s.whl" % (name, version, tag()))
    generated = {
        "METADATA": metadata(project, version),
        "WHEEL": "Wheel-Version: 1.0\nGenerator: kolo tests/install/make_wheel.py\n"
                 "Root-Is-Purelib: false\nTag: %s\n" % tag(),
        "entry_points.txt": entry_points(project),
    }
    records = []
    with zipfile.ZipFile(wheel_path, "w", zipfile.ZIP_DEFLATED) as wheel:
        for root, dirs, files in os.walk(staged):
            dirs.sort()
            for file in sorted(files):
                path = os.path.join(root, file)
                arcname = os.path.relpath(path, staged)
                if os.path.islink(path):
                    sys.exit("make_wheel.py: %s is a symlink; a wheel keeps none" % arcname)
                with open(path, "rb") as f:
                    data = f.read()
                info = zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0))
                info.external_attr = (os.stat(path).st_mode & 0o777 | 0o100000) << 16
                info.compress_type = zipfile.ZIP_DEFLATED
                wheel.writestr(info, data)
                records.append(record_line(arcname, data))
        for file, text in generated.items():
            arcname = "%s/%s" % (dist_info, file)
            wheel.writestr(arcname, text)
            records.append(record_line(arcname, text.encode()))
        records.append("%s/RECORD,," % dist_info)
        wheel.writestr("%s/RECORD" % dist_info, "\n".join(records) + "\n")
    print(wheel_path)


if __name__ == "__main__":
    main()
