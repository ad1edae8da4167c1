#!/usr/bin/env python3
"""Turns the raw outputs of tools/bench/compare.sh into the tables of docs/PERFORMANCE.md
(markdown on stdout).

usage: compare_report.py OUT_DIR
"""
import glob
import os
import re
import sys

TCP_PEERS = ("ompi-tcp", "ompi-ring-tcp", "mpich-tcp", "gloo-ring", "gloo-ring_chunked")
SHM_PEERS = ("ompi-shm", "ompi-ring-shm", "mpich-shm")


def peer_table(path, column):
    """{bytes: value} from a run.sh table (bytes count warm iters time_us ... busbw_GBps ...)."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        fields = line.split()
        if not fields or line.startswith("#") or not fields[0].isdigit():
            continue
        rows[int(fields[0])] = float(fields[column])
    return rows


def kolo_table(path, column):
    """{bytes: value} from kolo-bench's rows ('[0]  bytes count type redop root time algbw busbw')."""
    rows = {}
    if not os.path.exists(path):
        return rows
    for line in open(path):
        m = re.match(r"\[0\]\s+(\d+)\s+\d+\s+\w+\s+\w+\s+-?\d+\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)", line)
        if m:
            rows[int(m.group(1))] = float(m.group(column))
    return rows


def size_text(n):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n // scale} {unit}"
    return f"{n} B"


def best_peer(raw, names, np, size, column, better):
    best = None
    for name in names:
        value = peer_table(os.path.join(raw, f"sweep__{name}__np{np}.txt"), column).get(size)
        if value is not None and (best is None or better(value, best[1])):
            best = (name, value)
    return best


def main():
    out = sys.argv[1]
    passes = sorted(glob.glob(os.path.join(out, "baselines", "raw", "*-pass1")))
    raw = passes[-1] if passes else ""
    nps = sorted({int(m.group(1)) for f in glob.glob(os.path.join(out, "kolo__*__np*.txt"))
                  for m in [re.search(r"np(\d+)\.txt$", f)] if m})
    transports = [t for t in ("tcp", "shm") if glob.glob(os.path.join(out, f"kolo__{t}__np*.txt"))]
    print(f"# kolo against its peers, one run ({raw or 'no peer results'})\n")
    for transport in transports:
        peers = TCP_PEERS if transport == "tcp" else SHM_PEERS
        print(f"## busbw over {transport} (GB/s; kolo median time, peers median time)\n")
        for np in nps:
            kolo = kolo_table(os.path.join(out, f"kolo__{transport}__np{np}.txt"), 4)
            print(f"{np} ranks\n")
            print("| size | kolo | best peer | peer | kolo / peer |")
            print("|---:|---:|---|---:|---:|")
            for size in sorted(kolo):
                best = best_peer(raw, peers, np, size, 9, lambda a, b: a > b)
                if best is None:
                    print(f"| {size_text(size)} | {kolo[size]:.2f} | - | - | - |")
                    continue
                ratio = kolo[size] / best[1] if best[1] > 0 else float("inf")
                print(f"| {size_text(size)} | {kolo[size]:.2f} | {best[0]} | {best[1]:.2f} | "
                      f"{ratio:.2f} |")
            print()
    print("## 4 KiB allreduce latency, 2 ranks (median us)\n")
    print("| kolo transport | kolo | Open MPI shm | Open MPI tcp | kolo / ompi-shm | kolo / ompi-tcp |")
    print("|---|---:|---:|---:|---:|---:|")
    shm = peer_table(os.path.join(raw, "lat__ompi-shm__np2.txt"), 4).get(4096) if raw else None
    tcp = peer_table(os.path.join(raw, "lat__ompi-tcp__np2.txt"), 4).get(4096) if raw else None
    for transport in transports:
        lat = kolo_table(os.path.join(out, f"kolo-lat__{transport}__np2.txt"), 2).get(4096)
        if lat is None:
            continue
        cells = [f"{v:.1f}" if v else "-" for v in (shm, tcp)]
        ratios = [f"{lat / v:.1f}" if v else "-" for v in (shm, tcp)]
        print(f"| {transport} | {lat:.1f} | {cells[0]} | {cells[1]} | {ratios[0]} | {ratios[1]} |")
    print()
    print("## ResNet-50 gradient step against one raw allreduce of the same bytes, 2 ranks\n")
    print("| transport | step median (us) | raw median (us) | step / raw |")
    print("|---|---:|---:|---:|")
    for transport in transports:
        path = os.path.join(out, f"kolo-model__{transport}__np2.txt")
        if not os.path.exists(path):
            continue
        text = open(path).read()
        step = re.search(r"step through the runtime\s+(\d+)", text)
        raw_time = re.search(r"raw data plane, one buffer\s+(\d+)", text)
        if step and raw_time:
            s, r = float(step.group(1)), float(raw_time.group(1))
            print(f"| {transport} | {s:.0f} | {r:.0f} | {s / r:.3f} |")
    print()


if __name__ == "__main__":
    main()
