#!/usr/bin/env bash
# Records the Horovod side of the differential test (parity.py): runs every scenario under
# horovodrun --gloo with horovod.torch at 1, 2, 3 and 4 ranks and writes expected/ranks_<N>.json,
# which ctest's torch_parity_<N>_ranks compare kolo.torch against. Not part of CI: it needs
# Horovod 0.28.1 built against the same torch as kolo.torch (tools/bench/torch/build_horovod.sh
# builds one; ../shared/notes/torch.md says how by hand), and it is rerun only when scenarios
# change. Takes ~2 minutes on 2 cores.
#
#   tests/python/parity/record_horovod.sh HOROVOD_PYTHON [RANKS...]
#
# HOROVOD_PYTHON: the python of a venv with horovod.torch (its horovodrun beside it).
set -euo pipefail
python="${1:?usage: record_horovod.sh HOROVOD_PYTHON [RANKS...]}"
shift
ranks=("$@")
[ ${#ranks[@]} -gt 0 ] || ranks=(1 2 3 4)
here="$(cd "$(dirname "$0")" && pwd)"
horovodrun="$(dirname "$python")/horovodrun"
versions="$("$python" -c 'import horovod, torch; print(horovod.__version__, torch.__version__)')"
read -r horovod_version torch_version <<<"$versions"
work="$(mktemp -d)"
trap '[ -n "${KEEP:-}" ] || rm -rf "$work"' EXIT

for n in "${ranks[@]}"; do
  echo "[record_horovod] $n rank(s): Horovod $horovod_version, torch $torch_version" >&2
  # Gloo's 30 s default timeout closes the job when a loaded machine is slow to schedule.
  OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE=1 HOROVOD_GLOO_TIMEOUT_SECONDS=600 \
    "$horovodrun" -np "$n" -H "localhost:$n" --gloo \
    "$python" "$here/parity.py" --hvd horovod.torch --record "$work/$n" >"$work/log.$n" 2>&1 || {
    tail -40 "$work/log.$n" >&2
    echo "[record_horovod] horovodrun failed at $n ranks" >&2
    exit 1
  }
  "$python" - "$work/$n" "$n" "$horovod_version" "$torch_version" \
    "$here/expected/ranks_$n.json" <<'EOF'
import json, os, sys
directory, ranks, horovod, torch_version, out = sys.argv[1:]
ranks = int(ranks)
records = []
for rank in range(ranks):
    with open(os.path.join(directory, "rank%d.json" % rank)) as source:
        records.append(json.load(source))
os.makedirs(os.path.dirname(out), exist_ok=True)
with open(out, "w") as sink:
    # One record a line: a change in Horovod's answers reads as a small diff.
    sink.write('{"horovod": %s, "torch": %s, "ranks": %d, "records": [\n'
               % (json.dumps(horovod), json.dumps(torch_version), ranks))
    for index, rank_records in enumerate(records):
        sink.write("{\n" + ",\n".join("%s: %s" % (json.dumps(k), json.dumps(v, sort_keys=True))
                                      for k, v in sorted(rank_records.items())))
        sink.write("\n}" + (",\n" if index + 1 < ranks else "\n"))
    sink.write("]}\n")
print("[record_horovod] wrote %s: %d records on rank 0" % (out, len(records[0])),
      file=sys.stderr)
EOF
done
