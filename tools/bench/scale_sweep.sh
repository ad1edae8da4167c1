#!/usr/bin/env bash
# kolo against Open MPI's shared memory as the rank count grows on one machine (issue 35's
# one-machine sweep, docs/SCALE.md): the allreduce of one small and one mid size at 2, 4, ...
# ranks, kolo through its public API (kolo-bench, in place, default transport, a barrier before
# every timed call, median of the slowest rank) and Open MPI's MPI_Allreduce (in place, the same
# timing: ../shared/bench/mpi_allreduce_bench.cc), interleaved: at every rank count each side
# runs once per round, rounds after one another, so a slow spell of a shared machine spreads over
# both. Prints one table: per rank count and size, the median over rounds of each side, kolo's
# time over Open MPI's, and kolo's growth per doubling of the ranks.
#
#   tools/bench/scale_sweep.sh build              (~10 min on 2 cores with the defaults)
#
# Environment: RANKS (default "2 4 8 16 32 64"), SMALL (default 4K), MID (default 1M; measured
# up to MID_MAX_RANKS ranks, default 16), ROUNDS (default 3), ITERS (timed ops, default 100 for
# SMALL and 10 for MID), OUT_DIR (raw outputs; default a fresh /tmp folder), BENCH_SRC (the
# peers' benchmark sources, default ../shared/bench). Needs mpicxx.openmpi and mpirun.openmpi
# (Debian: openmpi-bin libopenmpi-dev). Every rank count past the core count oversubscribes the
# cores for both sides alike.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -eq 1 ] || { echo "usage: $0 BUILD" >&2; exit 2; }
build="$(cd "$1" && pwd)"
ranks="${RANKS:-2 4 8 16 32 64}"
small="${SMALL:-4K}"
mid="${MID:-1M}"
mid_max_ranks="${MID_MAX_RANKS:-16}"
rounds="${ROUNDS:-3}"
bench_src="${BENCH_SRC:-$repo/../shared/bench}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-scale-XXXXXX)}"
mkdir -p "$out"
log() { printf '[scale %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build it first"; exit 1; }
done
for tool in mpicxx.openmpi mpirun.openmpi; do
  command -v "$tool" >/dev/null ||
    { log "missing $tool: apt-get install openmpi-bin libopenmpi-dev"; exit 1; }
done
[ -f "$bench_src/mpi_allreduce_bench.cc" ] ||
  { log "no $bench_src/mpi_allreduce_bench.cc (set BENCH_SRC)"; exit 1; }
mpi_bench="$out/mpi_allreduce_bench"
mpicxx.openmpi -std=c++17 -O3 -march=native -I"$bench_src" -o "$mpi_bench" \
  "$bench_src/mpi_allreduce_bench.cc"
{
  echo "cpu: $(lscpu | sed -n 's/^Model name:[[:space:]]*//p'), $(nproc) cores"
  echo "kolo: $build ($(git -C "$repo" rev-parse --short HEAD))"
  echo "openmpi: $(mpirun.openmpi --version 2>&1 | head -1)"
} >"$out/machine.txt"

ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo
      --mca btl_tcp_if_include lo)
run() {  # run FILE command...: a hung run costs its timeout, not the sweep
  local file=$1
  shift
  timeout -k 5 900 "$@" >"$file" 2>"$file.err" || log "$* exited $? (see $file.err)"
}

for round in $(seq 1 "$rounds"); do
  for np in $ranks; do
    sizes=("$small")
    [ "$np" -le "$mid_max_ranks" ] && sizes+=("$mid")
    for size in "${sizes[@]}"; do
      iters="${ITERS:-}"
      [ -n "$iters" ] || { [ "$size" = "$small" ] && iters=100 || iters=10; }
      log "round $round of $rounds: $np ranks, $size"
      run "$out/kolo__${np}__${size}__r$round.txt" "$build/bin/kolorun" -np "$np" \
        "$build/bin/kolo-bench" -b "$size" -e "$size" -n "$iters" -w 5 --stat median \
        --barrier 1 --inplace 1
      run "$out/ompi__${np}__${size}__r$round.txt" "${ompi[@]}" -np "$np" "$mpi_bench" \
        -b "$size" -e "$size" -n "$iters" -w 5
    done
  done
done

python3 - "$out" <<'EOF'
import collections, glob, os, re, statistics, sys

out = sys.argv[1]
times = collections.defaultdict(list)  # (side, np, size) -> [µs per round]
for path in glob.glob(os.path.join(out, "*__r*.txt")):
    side, np, size, _ = os.path.basename(path).split("__")
    for line in open(path):
        fields = line.split()
        if fields and re.fullmatch(r"\[\d+\]", fields[0]):
            fields = fields[1:]  # kolorun's rank prefix
        # Result rows start with the byte and element counts. kolo-bench: size count type
        # redop root time ...; the MPI benchmark: bytes count warm iters time_us ...
        if len(fields) >= 6 and fields[0].isdigit() and fields[1].isdigit():
            times[(side, int(np), size)].append(float(fields[5 if side == "kolo" else 4]))
            break
print(open(os.path.join(out, "machine.txt")).read().strip())
print("\n| ranks | size | kolo µs (min-max) | Open MPI shm µs (min-max) | kolo / Open MPI "
      "| kolo x per doubling |")
print("|---|---|---|---|---|---|")
previous = {}
for size, np in sorted({(size, np) for (_, np, size) in times},
                       key=lambda k: (k[0] != os.environ.get("SMALL", "4K"), k[1])):
    kolo, ompi = times.get(("kolo", np, size), []), times.get(("ompi", np, size), [])
    cell = lambda t: "%.0f (%.0f-%.0f)" % (statistics.median(t), min(t), max(t)) if t else "-"
    ratio = "%.1f" % (statistics.median(kolo) / statistics.median(ompi)) if kolo and ompi \
        else "-"
    growth = "-"
    if kolo and size in previous:
        prev_np, prev_t = previous[size]
        steps = (np // prev_np).bit_length() - 1
        if steps > 0:
            growth = "%.2f" % ((statistics.median(kolo) / prev_t) ** (1 / steps))
    if kolo:
        previous[size] = (np, statistics.median(kolo))
    print("| %d | %s | %s | %s | %s | %s |" % (np, size, cell(kolo), cell(ompi), ratio, growth))
print("\nraw outputs: %s" % out)
EOF
