#!/bin/bash
# Elastic regrow soak (kolo issue 53, F6): loops one scenario of kolorun's elastic driver and
# counts how often it ends as it must. Each iteration: 3 workers on loopback hosts
# (localhost, 127.0.0.2, 127.0.0.3; -np 3 --min-np 2 --elastic-timeout 15), kolo-elastic-train
# --steps 400 --commit-every 5 --step-ms 20; after the commit of step 20 the discovery output
# drops to localhost alone (below --min-np) for 3 s, then lists the three hosts again. Passes
# when kolorun exits 0 within 60 s with 3 "done" lines, each with the weights a one-rank run
# computes. A failed iteration's output is kept under the output folder.
#
#   tools/soak/elastic_regrow.sh [ITERATIONS] [BIN_DIR] [OUT_DIR]
#   (defaults: 20, build/bin, a new folder under /tmp)
# COMMIT_EVERY=1 STEP_MS=2 make rank 0 ask the driver at nearly every step, which makes the
# race of F6 (a commit that sees the removal before the removed workers die) more likely;
# IGNORE_SIGTERM=1 runs the workers with SIGTERM ignored, so the removed ones live on until
# rank 0's next commit sees the removal: the race every time. KEEP=1 keeps passed runs' output.
set -u
commit_every=${COMMIT_EVERY:-5}
step_ms=${STEP_MS:-20}
iterations=${1:-20}
bin=${2:-build/bin}
out=${3:-$(mktemp -d /tmp/kolo-elastic-regrow.XXXXXX)}
bin=$(cd "$bin" && pwd)
mkdir -p "$out"
# The weights a one-rank run computes (outside an elastic job the trainer runs alone).
expected=$("$bin/kolo-elastic-train" --steps 400 --commit-every 5 --step-ms 0 |
  grep -o 'done steps 400 weights [-0-9.]*')
passed=0
for ((i = 1; i <= iterations; i++)); do
  dir="$out/run.$i"
  mkdir -p "$dir"
  printf 'localhost:1\n127.0.0.2:1\n127.0.0.3:1\n' >"$dir/hosts.txt"
  start=$(date +%s.%N)
  wrap=()
  [[ -n ${IGNORE_SIGTERM:-} ]] && wrap=(/bin/sh -c 'trap "" TERM; exec "$0" "$@"')
  timeout -s KILL 60 "$bin/kolorun" -np 3 --min-np 2 --elastic-timeout 15 \
    --host-discovery-script "cat $dir/hosts.txt" \
    "${wrap[@]}" "$bin/kolo-elastic-train" --steps 400 --commit-every "$commit_every" \
    --step-ms "$step_ms" \
    >"$dir/out.txt" 2>"$dir/err.txt" &
  job=$!
  for ((w = 0; w < 600; w++)); do  # up to 60 s for the commit of step 20
    grep -q 'commit step 20 size 3' "$dir/out.txt" 2>/dev/null && break  # 20: a multiple of both
    sleep 0.1
  done
  printf 'localhost:1\n' >"$dir/hosts.tmp" && mv "$dir/hosts.tmp" "$dir/hosts.txt"
  sleep 3
  printf 'localhost:1\n127.0.0.2:1\n127.0.0.3:1\n' >"$dir/hosts.tmp" &&
    mv "$dir/hosts.tmp" "$dir/hosts.txt"
  wait "$job"
  rc=$?
  seconds=$(echo "$(date +%s.%N) - $start" | bc)
  done_lines=$(grep -c '] done steps' "$dir/out.txt")
  right=$(grep -c "] $expected" "$dir/out.txt")
  if [[ $rc -eq 0 && $done_lines -eq 3 && $right -eq 3 ]]; then
    passed=$((passed + 1))
    echo "iteration $i: passed in ${seconds} s"
    [[ -n ${KEEP:-} ]] || rm -rf "$dir"
  else
    echo "iteration $i: FAILED (kolorun exit $rc after ${seconds} s, $done_lines done lines," \
      "$right with the one-rank weights); output in $dir"
  fi
done
echo "elastic regrow soak: $passed of $iterations iterations passed"
[[ $passed -eq $iterations ]]
