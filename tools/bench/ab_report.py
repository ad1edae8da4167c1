#!/usr/bin/env python3
"""Turns the raw outputs of tools/bench/ab.sh into tables (markdown on stdout): per size, the
median over the rounds of build A and of build B (min-max beside it) and B/A of the medians.
Above 1.00 means B takes longer.

usage: ab_report.py OUT_DIR
"""
import glob
import os
import re
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare_report import kolo_table, size_text, spread  # noqa: E402


def torch_table(path):
    """{bytes: us} from allreduce_bench.py's rows ('[0]  size count type redop time algbw ...')."""
    rows = {}
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"(?:\[\d+\])?\s+(\d+)\s+\d+\s+\w+\s+\w+\s+([\d.]+)\s", line)
            if m:
                rows[int(m.group(1))] = float(m.group(2))
    return rows


def step_table(path):
    """{'step': ms} from train_bench.py's one row ('[0]  ms/step min max img/s ...')."""
    if os.path.exists(path):
        for line in open(path):
            m = re.match(r"(?:\[\d+\])?\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s", line)
            if m:
                return {"step": float(m.group(1))}
    return {}


def rounds(out, side, kind, transport, table):
    """{key: [value per round]} over one configuration's round files."""
    values = {}
    for path in sorted(glob.glob(os.path.join(out, f"{side}__{kind}__{transport}__r*.txt"))):
        for key, value in table(path).items():
            values.setdefault(key, []).append(value)
    return values


def print_table(title, unit, a, b):
    if not a and not b:
        return
    print(f"### {title}\n")
    print(f"| size | A, {unit} median (min-max) | B, {unit} median (min-max) | B/A |")
    print("|---|---|---|---|")
    for key in sorted(set(a) | set(b), key=lambda k: (isinstance(k, str), k)):
        cells = []
        medians = []
        for side in (a, b):
            if key in side:
                text, med = spread(side[key])
                cells.append(text)
                medians.append(med)
            else:
                cells.append("-")
        ratio = f"{medians[1] / medians[0]:.2f}" if len(medians) == 2 and medians[0] else "-"
        label = key if isinstance(key, str) else size_text(key)
        print(f"| {label} | {cells[0]} | {cells[1]} | {ratio} |")
    print()


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = argv[1]
    if os.path.exists(os.path.join(out, "builds.txt")):
        lines = [line for line in open(os.path.join(out, "builds.txt")).read().split("\n") if line]
        print("Builds: " + "; ".join(lines))
        print()
    time_column = 2  # kolo_table's groups: 1 bytes, 2 time, 3 algbw, 4 busbw
    for transport in ("tcp", "shm"):
        for kind, title in (("lat", "small ops"), ("sweep", "sweep")):
            print_table(f"kolo-bench over {transport}, {title}, in place", "us",
                        rounds(out, "A", kind, transport, lambda p: kolo_table(p, time_column)),
                        rounds(out, "B", kind, transport, lambda p: kolo_table(p, time_column)))
    print_table("kolo.torch allreduce_ over shm", "us", rounds(out, "A", "torch", "shm", torch_table),
                rounds(out, "B", "torch", "shm", torch_table))
    print_table("kolo.torch ResNet-50 step over shm, batch 8, 2 ranks", "ms",
                rounds(out, "A", "step", "shm", step_table),
                rounds(out, "B", "step", "shm", step_table))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
