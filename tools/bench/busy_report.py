#!/usr/bin/env python3
"""Turns the raw outputs of tools/bench/busy_compare.sh into tables (markdown on stdout): per
number of busy processes, per size, the median over the rounds of each configuration's time in
us (min-max beside it), and the ratios the goals of docs/PERFORMANCE.md "On a busy machine" are
stated in: kolo over Open MPI (goal: at most 2.0) and gloo over kolo's torch.distributed
backend (goal: at least 1.0); then the ResNet-50 step with a DataLoader, kolo.torch against
DDP (goal: kolo's step at most DDP's).

usage: busy_report.py OUT_DIR
"""
import glob
import os
import re
import statistics
import sys

ROW = {
    # kolo-bench: [0] size count type redop root time algbw busbw #wrong
    "kolo": re.compile(r"\[0\]\s+(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s"),
    # mpi_allreduce_bench: size count warmup iters median min p90 mean algbw busbw ...
    "ompi": re.compile(r"\s+(\d+)\s+\d+\s+\d+\s+\d+\s+([\d.]+)\s"),
    # allreduce_bench.py: [0] size count type redop time algbw busbw #wrong (horovodrun
    # prefixes "[0]<stdout>:")
    "torch": re.compile(r"(?:\[\d+\](?:<stdout>:)?)?\s+(\d+)\s+\d+\s+float\s+\w+\s+([\d.]+)\s"),
    # train_bench.py: ms/step min max img/s main-cpu other-cpu #wrong
    "step": re.compile(r"(?:\[\d+\])?\s+([\d.]+)\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+[\d.]+\s+0\s*$"),
}
SIZED = [("kolo", "kolo"), ("ompi", "ompi"), ("c10d-kolo", "torch"), ("c10d-gloo", "torch"),
         ("kolo.torch", "torch"), ("horovod", "torch")]


def table(path, kind):
    """{size: us} (or {"step": ms}) from one output file; empty if it is missing or failed."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        m = ROW[kind].match(line)
        if m and kind == "step":
            rows["step"] = float(m.group(1))
        elif m:
            rows[int(m.group(1))] = float(m.group(2))
    return rows


def collect(out, busy, name, kind):
    """{key: [value per round]}."""
    values = {}
    for path in sorted(glob.glob(os.path.join(out, "busy%s__r*.%s.txt" % (busy, name)))):
        for key, value in table(path, kind).items():
            values.setdefault(key, []).append(value)
    return values


def cell(values):
    if not values:
        return "-", None
    med = statistics.median(values)
    text = "%.1f" % med if len(values) == 1 else "%.1f (%.1f-%.1f)" % (med, min(values),
                                                                      max(values))
    return text, med


def ratio(a, b):
    return "-" if a is None or b is None or b == 0 else "%.2f" % (a / b)


def size_text(n):
    for unit, scale in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % scale == 0:
            return "%d %s" % (n // scale, unit)
    return "%d B" % n


def main(out):
    if os.path.exists(os.path.join(out, "machine.txt")):
        print("".join("    " + line for line in open(os.path.join(out, "machine.txt"))))
    busies = sorted({int(m.group(1)) for p in os.listdir(out)
                     for m in [re.match(r"busy(\d+)__", p)] if m})
    for busy in busies:
        data = {name: collect(out, busy, name, kind) for name, kind in SIZED}
        names = [name for name, _ in SIZED if data[name]]
        sizes = sorted({s for name in names for s in data[name]})
        print("\n### %d busy process%s beside 2 ranks (us, median over rounds, min-max)\n"
              % (busy, "" if busy == 1 else "es"))
        print("| size | " + " | ".join(names) + " | kolo / ompi | gloo / c10d-kolo |")
        print("|---" * (len(names) + 3) + "|")
        for size in sizes:
            texts, meds = [], {}
            for name in names:
                text, meds[name] = cell(data[name].get(size, []))
                texts.append(text)
            print("| %s | %s | %s | %s |" % (size_text(size), " | ".join(texts),
                                              ratio(meds.get("kolo"), meds.get("ompi")),
                                              ratio(meds.get("c10d-gloo"), meds.get("c10d-kolo"))))
    steps = []
    for busy in busies:
        kolo = cell(collect(out, busy, "step-kolo.torch", "step").get("step", []))
        ddp = cell(collect(out, busy, "step-ddp-gloo", "step").get("step", []))
        if kolo[1] is not None or ddp[1] is not None:
            steps.append((busy, kolo, ddp))
    if steps:
        print("\n### ResNet-50 step, 2-worker DataLoader, torch's default threads (ms)\n")
        print("| busy | kolo.torch | DDP (gloo) | kolo / DDP |")
        print("|---|---|---|---|")
        for busy, kolo, ddp in steps:
            print("| %d | %s | %s | %s |" % (busy, kolo[0], ddp[0], ratio(kolo[1], ddp[1])))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
