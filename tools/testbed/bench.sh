#!/usr/bin/env bash
# bench.sh: allreduce on the multi-host testbed, kolo flat and hierarchical against Open MPI in
# the same run, printed as one table (median µs per op of the slowest rank, bus bandwidth).
#
#   tools/testbed/bench.sh [--hosts 4] [--ranks-per-host 4] [--rate 10gbit] [--delay 25us]
#                          [--sizes 4K,64M] [--iters 20] [--warmup 5] [--op allreduce]
#                          [--set N]
#
# --op allgather, reducescatter, broadcast (from rank 0) or alltoall times kolo's, flat and
# hierarchical, in their place (kolo-bench's sizes: allgather's output, reducescatter's input,
# broadcast's buffer, each rank's alltoall input); Open MPI's benchmarks time allreduce and
# alltoall (tools/bench/mpi_alltoall_bench.cc, 20 iterations after 3), so the other tables have
# no Open MPI row.
# (Default hosts and ranks: 4 x 4 on a machine of 16 cores or more, else 2 x 2.)
# --set N runs kolo's op in a process set of ranks 0 .. N-1 (kolo-bench --set: the first
# N / ranks-per-host hosts when N is a multiple of it; the other ranks wait in a barrier), and
# Open MPI's allreduce with N ranks (mpirun -np N fills the first hosts the same way).
# Brings a testbed up (deleted at the end, also when interrupted), then per size runs
# kolo-bench with KOLO_HIERARCHICAL=off and =on (passed through; a kolo that does not know the
# variable fails, and the table says what it reported) and Open MPI's MPI_Allreduce benchmark
# (../shared/bench/mpi_allreduce_bench.cc or $MPI_BENCH, built into build/testbed). Both time
# one in-place allreduce after an untimed barrier per iteration. Needs root.
# Environment: KOLORUN, MPIRUN as for tools/testbed/testbed; BUILD (default build).
set -euo pipefail
shopt -s inherit_errexit
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
build=${BUILD:-$repo/build}
testbed=$here/testbed
# 4 hosts x 4 ranks (the issue's testbed) where the cores allow it, else 2 x 2.
if (($(nproc) >= 16)); then hosts=4 ranks=4; else hosts=2 ranks=2; fi
rate=10gbit delay=25us sizes=4K,64M iters=20 warmup=5 op=allreduce set=""
while (($#)); do
  case $1 in
  --hosts) hosts=${2:?}; shift 2 ;;
  --ranks-per-host) ranks=${2:?}; shift 2 ;;
  --rate) rate=${2:?}; shift 2 ;;
  --delay) delay=${2:?}; shift 2 ;;
  --sizes) sizes=${2:?}; shift 2 ;;
  --iters) iters=${2:?}; shift 2 ;;
  --warmup) warmup=${2:?}; shift 2 ;;
  --op) op=${2:?}; shift 2 ;;
  --set) set=${2:?}; shift 2 ;;
  -h | --help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
  *) echo "bench.sh: unknown flag '$1' (--help)" >&2; exit 2 ;;
  esac
done
case $op in
allreduce) op_flags=(--inplace 1) ;;  # as Open MPI's benchmark, MPI_IN_PLACE
allgather | reducescatter | broadcast | alltoall) op_flags=(--op "$op") ;;
*) echo "bench.sh: --op must be allreduce, allgather, reducescatter, broadcast or alltoall, not '$op'" >&2; exit 2 ;;
esac
set_flags=() mpi_flags=()
if [[ -n $set ]]; then set_flags=(--set "$set") mpi_flags=(-np "$set"); fi
[[ -x $build/bin/kolo-bench ]] || { echo "bench.sh: no $build/bin/kolo-bench: build kolo first" >&2; exit 1; }
export KOLORUN=${KOLORUN:-$build/bin/kolorun}

ompi_bench=""
if [[ $op == allreduce || $op == alltoall ]] && command -v "${MPIRUN:-/usr/bin/mpirun}" >/dev/null; then
  ompi_bench=$("$here/build-mpi-bench" "$build/testbed" "${op/allreduce/}") || ompi_bench=""
fi

name=bench$$
log=$(mktemp -d "${TMPDIR:-/tmp}/kolo-testbed-bench.XXXXXX")
trap '"$testbed" down --name "$name"; rm -rf "$log"' EXIT
trap 'exit 130' INT TERM HUP
"$testbed" up --name "$name" --owner $$ --hosts "$hosts" --ranks-per-host "$ranks" \
  --rate "$rate" --delay "$delay"

# Bytes of a size with a K, M or G suffix.
bytes_of() {
  awk -v v="$1" 'BEGIN { n = v + 0; u = toupper(substr(v, length(v)));
    f = u == "K" ? 1024 : u == "M" ? 1048576 : u == "G" ? 1073741824 : 1; printf "%d", n * f }'
}

# One table row: CONFIG SIZE, then the program's output in $log/out and $log/err.
row() {
  local config=$1 size=$2 rc=$3 fields
  if [[ $config == ompi && $op == alltoall ]]; then  # bytes per_peer time_us wrong
    fields=$(awk '$1 ~ /^[0-9]+$/ && NF == 4 { print $3, "-", $4 }' "$log/out" | tail -1)
  elif [[ $config == ompi ]]; then  # bytes count warm iters time_us ... busbw_GBps wrong flt
    fields=$(awk '$1 ~ /^[0-9]+$/ && NF >= 11 { print $5, $10, $11 }' "$log/out" | tail -1)
  else  # [0] size count type redop root time algbw busbw #wrong
    fields=$(awk '$1 == "[0]" && $2 ~ /^[0-9]+$/ && NF >= 10 { print $7, $9, $10 }' "$log/out" |
      tail -1)
  fi
  if ((rc == 0)) && [[ -n $fields ]]; then
    read -r time busbw wrong <<<"$fields"
    printf '| %s | %s | %s | %s | %s |\n' "$config" "$size" "$time" "$busbw" "$wrong"
  else
    local why
    why=$(grep -m1 -iE 'error|fail|unknown|refused' "$log/err" "$log/out" -h || tail -1 "$log/err")
    printf '| %s | %s | exit %s: %s | | |\n' "$config" "$size" "$rc" "${why//|/\\|}"
  fi
}

cpu=$(lscpu | awk -F': *' '/^Model name/ && !seen++ { print $2 }')
shaping=$("$testbed" status --name "$name" | sed -n '1s/.*; //p')
in_set=${set:+, in a process set of ranks 0 .. $((set - 1))}
if [[ $op == allreduce ]]; then
  echo "# kolo and Open MPI allreduce (float sum, in place) on the testbed: $hosts hosts x $ranks ranks$in_set"
else
  echo "# kolo $op (float) on the testbed: $hosts hosts x $ranks ranks$in_set"
fi
echo "# links: $shaping"
echo "# cpu: $cpu, $(nproc) cores; $(date -u '+%Y-%m-%d %H:%M UTC'); kolo $(git -C "$repo" rev-parse --short HEAD 2>/dev/null || echo '?')"
echo "# time: median over $iters iterations (after $warmup) of the slowest rank's µs; busbw GB/s"
echo "# reproduce: tools/testbed/bench.sh --hosts $hosts --ranks-per-host $ranks --rate $rate --delay $delay --sizes $sizes --iters $iters --warmup $warmup --op $op${set:+ --set $set}"
echo
echo "| config | size | time µs | busbw GB/s | wrong |"
echo "|---|---|---|---|---|"
for size in ${sizes//,/ }; do
  for hier in off on; do
    rc=0
    KOLO_HIERARCHICAL=$hier timeout -k 5 600 "$testbed" run --name "$name" --start-timeout 60 -- \
      "$build/bin/kolo-bench" -b "$size" -e "$size" -n "$iters" -w "$warmup" --stat median \
      --barrier 1 "${op_flags[@]}" "${set_flags[@]}" >"$log/out" 2>"$log/err" || rc=$?
    row "kolo hierarchical=$hier" "$size" "$rc"
  done
  if [[ $op != allreduce && $op != alltoall ]]; then
    :  # Open MPI's benchmarks time allreduce and alltoall only
  elif [[ -n $ompi_bench && $op == alltoall ]]; then
    rc=0
    timeout -k 5 600 "$testbed" mpirun --name "$name" "${mpi_flags[@]}" -- "$ompi_bench" "$size" \
      >"$log/out" 2>"$log/err" || rc=$?
    row ompi "$size" "$rc"
  elif [[ -n $ompi_bench ]]; then
    rc=0
    timeout -k 5 600 "$testbed" mpirun --name "$name" "${mpi_flags[@]}" -- "$ompi_bench" -s "$(bytes_of "$size")" \
      -n "$iters" -w "$warmup" >"$log/out" 2>"$log/err" || rc=$?
    row ompi "$size" "$rc"
  else
    echo "| ompi | $size | not run: no Open MPI benchmark (see above) | | |"
  fi
done
