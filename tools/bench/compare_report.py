#!/usr/bin/env python3
"""Turns the raw outputs of tools/bench/compare.sh into the tables of docs/PERFORMANCE.md
(markdown on stdout).

usage: compare_report.py OUT_DIR
"""
import glob
import os
import re
import statistics
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


def kolo_reps(out, kind, transport, np, column):
    """{bytes: [value per repetition]} over the repetition files of one kolo configuration."""
    values = {}
    for path in sorted(glob.glob(os.path.join(out, f"{kind}__{transport}__np{np}__rep*.txt"))):
        for size, value in kolo_table(path, column).items():
            values.setdefault(size, []).append(value)
    return values


def spread(values):
    """'median (min-max)' of one cell's repetitions, and the median."""
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.2f}", med
    return f"{med:.2f} ({min(values):.2f}-{max(values):.2f})", med


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


def busbw_tables(out, raw, transport, nps):
    peers = TCP_PEERS if transport == "tcp" else SHM_PEERS
    print(f"## busbw over {transport} (GB/s; kolo: median of the repetitions (min-max) of each "
          "repetition's median time; peers: median time)\n")
    for np in nps:
        inplace = kolo_reps(out, "kolo-inplace", transport, np, 4)
        outplace = kolo_reps(out, "kolo", transport, np, 4)
        dataplane = kolo_reps(out, "kolo-raw", transport, np, 4)
        print(f"{np} ranks\n")
        print("| size | kolo in place | kolo out of place | kolo data plane alone | best peer | "
              "peer | in place / peer | data plane / peer |")
        print("|---:|---:|---:|---:|---|---:|---:|---:|")
        for size in sorted(set(inplace) | set(outplace) | set(dataplane)):
            cells, medians = [], []
            for table in (inplace, outplace, dataplane):
                text, med = spread(table[size]) if size in table else ("-", None)
                cells.append(text)
                medians.append(med)
            best = best_peer(raw, peers, np, size, 9, lambda a, b: a > b)
            ratios = ["-", "-"]
            if best is not None and best[1] > 0:
                ratios = [f"{m / best[1]:.2f}" if m is not None else "-"
                          for m in (medians[0], medians[2])]
            peer = (best[0], f"{best[1]:.2f}") if best else ("-", "-")
            print(f"| {size_text(size)} | {cells[0]} | {cells[1]} | {cells[2]} | {peer[0]} | "
                  f"{peer[1]} | {ratios[0]} | {ratios[1]} |")
        print()


def latency_table(out, raw, transports):
    print("## 4 KiB allreduce latency, 2 ranks (median us; kolo in place through the API, "
          "and the data plane alone)\n")
    print("| kolo transport | kolo API | kolo data plane | API - data plane | Open MPI shm | "
          "Open MPI tcp | API / ompi-shm | API / ompi-tcp |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    shm = peer_table(os.path.join(raw, "lat__ompi-shm__np2.txt"), 4).get(4096) if raw else None
    tcp = peer_table(os.path.join(raw, "lat__ompi-tcp__np2.txt"), 4).get(4096) if raw else None
    for transport in transports:
        api = kolo_reps(out, "kolo-lat", transport, 2, 2).get(4096)
        plane = kolo_reps(out, "kolo-latraw", transport, 2, 2).get(4096)
        if not api:
            continue
        api_text, api_med = spread(api)
        plane_text, plane_med = spread(plane) if plane else ("-", None)
        overhead = f"{api_med - plane_med:.1f}" if plane_med is not None else "-"
        cells = [f"{v:.1f}" if v else "-" for v in (shm, tcp)]
        ratios = [f"{api_med / v:.1f}" if v else "-" for v in (shm, tcp)]
        print(f"| {transport} | {api_text} | {plane_text} | {overhead} | {cells[0]} | {cells[1]} | "
              f"{ratios[0]} | {ratios[1]} |")
    print()


def mode_check(out, raw):
    """Flags a run during which the machine changed speed. Each side measures a 4 KiB allreduce
    over shared memory twice, minutes apart: in its sweep and in its latency runs. On the
    development VM cross-core transfers sometimes run at half speed for minutes (Open MPI 4 KiB
    0.7 against 2.2 us); ratios between a fast and a slow measurement compare two machines."""
    pairs = []
    if raw:
        sweep = peer_table(os.path.join(raw, "sweep__ompi-shm__np2.txt"), 4).get(4096)
        lat = peer_table(os.path.join(raw, "lat__ompi-shm__np2.txt"), 4).get(4096)
        pairs.append(("Open MPI (ompi-shm)", sweep, lat))
    sweep = kolo_reps(out, "kolo-inplace", "shm", 2, 2).get(4096)
    lat = kolo_reps(out, "kolo-lat", "shm", 2, 2).get(4096)
    pairs.append(("kolo (in place, API)", statistics.median(sweep) if sweep else None,
                  statistics.median(lat) if lat else None))
    rows = [(name, a, b) for name, a, b in pairs if a and b]
    if not rows:
        return
    print("## Mode check: 4 KiB over shared memory, 2 ranks, measured twice in this run (us)\n")
    print("| who | in its sweep | in its latency runs | larger / smaller |")
    print("|---|---:|---:|---:|")
    flagged = []
    for name, a, b in rows:
        factor = max(a, b) / min(a, b)
        if factor > 1.5:
            flagged.append(name)
        print(f"| {name} | {a:.2f} | {b:.2f} | {factor:.1f} |")
    print()
    if flagged:
        print(f"**The machine changed speed during this run** ({', '.join(flagged)}: the two "
              "measurements differ by more than 1.5x). Ratios between results taken in "
              "different modes compare two machines; rerun, or read only ratios within one "
              "mode.\n")
    else:
        print("Both sides measured the same speed twice (within 1.5x).\n")


def model_table(out, transports):
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


def main():
    out = sys.argv[1]
    passes = sorted(glob.glob(os.path.join(out, "baselines", "raw", "*-pass1")))
    raw = passes[-1] if passes else ""
    files = glob.glob(os.path.join(out, "kolo*__*__np*__rep*.txt"))
    nps = sorted({int(m.group(1)) for f in files for m in [re.search(r"__np(\d+)__", f)] if m})
    transports = [t for t in ("tcp", "shm") if any(f"__{t}__" in f for f in files)]
    reps = len({m.group(1) for f in files for m in [re.search(r"__rep(\d+)\.txt$", f)] if m})
    print(f"# kolo against its peers, one run ({raw or 'no peer results'}; "
          f"{reps} repetitions of every kolo configuration)\n")
    for transport in transports:
        busbw_tables(out, raw, transport, nps)
    latency_table(out, raw, transports)
    model_table(out, transports)
    mode_check(out, raw)


if __name__ == "__main__":
    main()
