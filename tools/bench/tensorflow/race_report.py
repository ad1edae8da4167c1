"""The report of tools/bench/tensorflow_race.sh: reads its output folder and prints two markdown
tables, the median over rounds of each configuration's allreduce time per size (with
kolo.tensorflow's ratio to kolo-bench's C++ time) and of each ResNet-50 step time (with the
ratio to the step without communication). A run that failed shows as a gap.

    python3 tools/bench/tensorflow/race_report.py OUT_DIR
"""

import collections
import glob
import json
import os
import re
import statistics
import sys

ROW = re.compile(r"^\s+(\d+)\s+\d+\s+\w+\s+\w+\s+(?:-?\d+\s+)?([0-9.]+)\s")  # kolo-bench has a root column
SWEEP = ["kolo-bench", "kolo-eager", "kolo-function", "mwms"]
TRAIN = ["none", "kolo-keras3", "kolo-keras2", "mwms-keras2"]


def label(size):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= scale:
            return "%d %s" % (size // scale, unit)
    return "%d B" % size


def read(out):
    sweep = collections.defaultdict(lambda: collections.defaultdict(list))
    train = collections.defaultdict(list)
    for path in sorted(glob.glob(os.path.join(out, "*__r*.txt"))):
        kind, config, _ = os.path.basename(path)[:-4].split("__")
        with open(path) as f:
            lines = f.read().splitlines()
        if kind == "allreduce":
            for line in lines:
                match = ROW.match(line.split("] ", 1)[-1] if line.startswith("[") else line)
                if match:
                    sweep[config][int(match.group(1))].append(float(match.group(2)))
        else:
            for line in lines:
                text = line.split("] ", 1)[-1] if line.startswith("[") else line
                if text.startswith("# json "):
                    train[config].append(json.loads(text[len("# json "):])["ms_median"])
    return sweep, train


def main(out):
    sweep, train = read(out)
    sizes = sorted({s for runs in sweep.values() for s in runs})
    configs = [c for c in SWEEP if c in sweep]
    print("| allreduce, median µs | " + " | ".join(label(s) for s in sizes) + " |")
    print("|---" * (len(sizes) + 1) + "|")
    for config in configs:
        cells = ["%.1f" % statistics.median(sweep[config][s]) if sweep[config].get(s) else "-"
                 for s in sizes]
        print("| %s | %s |" % (config, " | ".join(cells)))
    if "kolo-bench" in sweep:
        for config in ("kolo-eager", "kolo-function"):
            if config not in sweep:
                continue
            cells = []
            for s in sizes:
                a, b = sweep[config].get(s), sweep["kolo-bench"].get(s)
                cells.append("%.2f" % (statistics.median(a) / statistics.median(b))
                             if a and b else "-")
            print("| %s / kolo-bench | %s |" % (config, " | ".join(cells)))
    print()
    print("| ResNet-50 step, 2 ranks, batch 8 | ms/step (median of rounds) | × no communication |")
    print("|---|---|---|")
    base = statistics.median(train["none"]) if train.get("none") else None
    for config in [c for c in TRAIN if c in train]:
        median = statistics.median(train[config])
        ratio = "%.2f" % (median / base) if base else "-"
        print("| %s | %.0f | %s |" % (config, median, ratio))


if __name__ == "__main__":
    main(sys.argv[1])
