#!/usr/bin/env python3
"""Tests of tools/bench/compare_report.py on small compare.sh output folders written here:
the busbw ratios against the best peer, and the mode check that flags a run during which the
machine changed speed (one side's two 4 KiB measurements apart by more than 1.5x).

usage: compare_report_test.py PATH/TO/compare_report.py
"""
import os
import subprocess
import sys
import tempfile

PEER_HEADER = ("bytes count warm iters time_us min_us p90_us mean_us algbw_GBps busbw_GBps wrong "
               "flt/call\n")


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def peer_row(size, time_us):
    gbps = size / time_us / 1e3  # 2 ranks: busbw = algbw
    return (f"{size} {size // 4} 2 10 {time_us} {time_us} {time_us} {time_us} {gbps:.3f} "
            f"{gbps:.3f} 0 0.0\n")


def kolo_row(size, time_us):
    gbps = size / time_us / 1e3
    return f"[0] {size:>12} {size // 4:>12} float sum -1 {time_us:>8} {gbps:.2f} {gbps:.2f} 0\n"


def make_run(root, ompi_sweep_us, ompi_lat_us, kolo_sweep_us, kolo_lat_us):
    raw = os.path.join(root, "baselines", "raw", "20261128-000000-pass1")
    write(os.path.join(raw, "sweep__ompi-shm__np2.txt"),
          PEER_HEADER + peer_row(4096, ompi_sweep_us) + peer_row(1 << 20, 100.0))
    write(os.path.join(raw, "lat__ompi-shm__np2.txt"), PEER_HEADER + peer_row(4096, ompi_lat_us))
    for rep in (1, 2, 3):
        write(os.path.join(root, f"kolo-inplace__shm__np2__rep{rep}.txt"),
              kolo_row(4096, kolo_sweep_us) + kolo_row(1 << 20, 50.0))
        write(os.path.join(root, f"kolo-raw__shm__np2__rep{rep}.txt"),
              kolo_row(4096, 0.6) + kolo_row(1 << 20, 80.0))
        write(os.path.join(root, f"kolo-lat__shm__np2__rep{rep}.txt"), kolo_row(4096, kolo_lat_us))


def report(script, root):
    return subprocess.run([sys.executable, script, root], check=True, capture_output=True,
                          text=True).stdout


def main():
    script = sys.argv[1]
    failures = []

    def check(condition, what, text):
        if not condition:
            failures.append(what + "\n--- report ---\n" + text)

    with tempfile.TemporaryDirectory() as same, tempfile.TemporaryDirectory() as mixed:
        make_run(same, ompi_sweep_us=0.8, ompi_lat_us=0.7, kolo_sweep_us=2.0, kolo_lat_us=1.9)
        text = report(script, same)
        # 1 MiB: in place 50 us and data plane 80 us against Open MPI's 100 us.
        check("| 1 MiB |" in text and "| ompi-shm | 10.49 | 2.00 | 1.25 |" in text,
              "the 1 MiB row of the shm table does not give ratios 2.00 and 1.25", text)
        check("Both sides measured the same speed twice" in text,
              "a run in one mode was not reported as such", text)
        check("changed speed" not in text, "a run in one mode was flagged", text)

        # Run L of 2026-11-28: Open MPI's latency runs three times slower than its sweep.
        make_run(mixed, ompi_sweep_us=0.72, ompi_lat_us=2.24, kolo_sweep_us=4.2, kolo_lat_us=4.0)
        text = report(script, mixed)
        check("**The machine changed speed during this run** (Open MPI (ompi-shm):" in text,
              "Open MPI's 3.1x apart measurements were not flagged", text)
        check("| Open MPI (ompi-shm) | 0.72 | 2.24 | 3.1 |" in text,
              "the mode table does not show Open MPI's two measurements", text)
        check("kolo (in place, API):" not in text, "kolo's consistent pair was flagged", text)

    for failure in failures:
        print("FAILED:", failure)
    print(f"compare_report_test: {len(failures)} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
