#!/usr/bin/env bash
# Point-to-point between two ranks on this machine: kolo (kolo-bench --pingpong, over its default
# shared-memory single copy and over KOLO_TRANSPORT=tcp) against MPI (tools/bench/mpi_p2p_bench.cc,
# built here with mpicxx; Open MPI's shared-memory transport by default), in ROUNDS interleaved
# rounds, timed the same way (one-way latency: half a send and its echo; stream: 16 sends in
# flight). Prints every run, then per size the median over rounds of each and kolo / MPI. Only
# ratios from one run mean anything on a shared machine; name the CPU beside them.
#
#   tools/bench/p2p_compare.sh [BUILD_DIR]      ROUNDS (3), ITERS (200), MAX (64M)
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
iters="${ITERS:-200}"
max="${MAX:-64M}"
out="$(mktemp -d /tmp/kolo-p2p-compare-XXXXXX)"
command -v mpicxx >/dev/null || { echo "p2p_compare: no mpicxx (apt-get install libopenmpi-dev)" >&2; exit 3; }
mpicxx -std=c++17 -O2 -o "$out/mpi_p2p_bench" "$repo/tools/bench/mpi_p2p_bench.cc"
echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq "$rounds"); do
  "$build/bin/kolorun" -np 2 "$build/bin/kolo-bench" --pingpong 1 -b 4 -e "$max" -f 4 -n "$iters" \
    -w 20 >"$out/kolo-shm.$round" 2>&1
  KOLO_TRANSPORT=tcp "$build/bin/kolorun" -np 2 "$build/bin/kolo-bench" --pingpong 1 -b 4 \
    -e "$max" -f 4 -n "$iters" -w 20 >"$out/kolo-tcp.$round" 2>&1
  mpirun --allow-run-as-root --oversubscribe -np 2 "$out/mpi_p2p_bench" 4 "$max" 4 "$iters" \
    >"$out/mpi.$round" 2>&1
done
python3 - "$out" "$rounds" <<'PY'
import re, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
row = re.compile(r"^(?:\[0\])?\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)\s*$")
def load(name):
    runs = []
    for r in range(1, rounds + 1):
        table = {}
        for line in open(f"{out}/{name}.{r}"):
            m = row.match(line)
            if m:
                if m.group(5) != "0":
                    sys.exit(f"{name} round {r}: wrong results at {m.group(1)} bytes")
                table[int(m.group(1))] = (float(m.group(2)), float(m.group(4)))
        runs.append(table)
    return runs
data = {k: load(k) for k in ("kolo-shm", "kolo-tcp", "mpi")}
med = lambda k, size, i: statistics.median(run[size][i] for run in data[k])
print("| size | kolo µs | kolo tcp µs | MPI µs | kolo/MPI latency | kolo GB/s stream | kolo tcp GB/s | MPI GB/s | kolo/MPI stream |")
print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for size in sorted(data["mpi"][0]):
    k, t, m = med("kolo-shm", size, 0), med("kolo-tcp", size, 0), med("mpi", size, 0)
    ks, ts, ms = med("kolo-shm", size, 1), med("kolo-tcp", size, 1), med("mpi", size, 1)
    print(f"| {size} | {k:.2f} | {t:.2f} | {m:.2f} | {k/m:.2f} | {ks:.3f} | {ts:.3f} | {ms:.3f} | {ks/ms:.2f} |")
PY
echo "# raw outputs: $out"
