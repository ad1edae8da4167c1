"""The differential test of kolo.torch against Horovod (issue 32): runs the scenarios of
scenarios_api.py and scenarios_ops.py with the module --hvd names (horovod.torch or kolo.torch, the scripts' only
difference), records what every op gave on this rank, and either writes the records (--record,
the Horovod side: tools/parity/record_horovod.sh) or compares them with recorded expectations
(--check, the kolo side: ctest torch_parity_<N>_ranks).

    horovodrun -np 2 -H localhost:2 --gloo python parity.py --hvd horovod.torch --record DIR
    kolorun -np 2 python parity.py --hvd kolo.torch --check expected/ranks_2.json

A record is JSON: tensors as dtype, shape and exact contents (values when small, a hash of the
bytes otherwise), exceptions as the Python built-in class they are (KoloError and Horovod's
HorovodInternalError are RuntimeErrors) and, where a scenario says so, a word of the message.
Each rank compares its own records and prints one line per difference naming the scenario, the
rank and both values; the exit status is 1 when any differs (kolorun then fails the job).
KNOWN lists the differences kolo keeps on purpose (docs/TORCH.md says why); they are reported,
not failed.
"""

import argparse
import faulthandler
import importlib
import json
import os
import re
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import recording  # noqa: E402
import scenarios_api  # noqa: E402,F401  (registers its scenarios)
import scenarios_ops  # noqa: E402,F401

# scenario:key regex -> why kolo differs on purpose (each one is in docs/TORCH.md).
KNOWN = {
    r"^identity:has\.__version__$": "kolo.torch has __version__ (kolo's); horovod.torch has none",
}

DEADLINE_SECONDS = float(os.environ.get("PARITY_DEADLINE_SECONDS", "120"))


def run(hvd, size, only):
    """Runs every scenario for this size; returns {"scenario:key": record}."""
    records = {}
    for scenario in recording.SCENARIOS:
        if only and not re.search(only, scenario.name):
            continue
        if size < scenario.min_ranks or (scenario.ranks and size not in scenario.ranks):
            continue
        recorder = recording.Recorder(scenario.name, records)
        faulthandler.dump_traceback_later(DEADLINE_SECONDS, exit=True)
        try:
            scenario.function(hvd, recorder)
        except Exception as error:  # a scenario that crashes is a difference too
            recorder.value("!crash", "%s: %s" % (recording.builtin_class(error),
                                                 str(error).splitlines()[0][:200]))
            traceback.print_exc()
        finally:
            faulthandler.cancel_dump_traceback_later()
    return records


def describe(record):
    text = json.dumps(record, sort_keys=True)
    return text if len(text) < 300 else text[:300] + "..."


def compare(expected, got, rank, size):
    """Lines naming each difference; known ones start with 'known'."""
    lines = []
    for key in list(expected) + [k for k in got if k not in expected]:
        want, have = expected.get(key, "<absent>"), got.get(key, "<absent>")
        if recording.same(want, have):
            continue
        scenario, _, item = key.partition(":")
        reason = next((why for pattern, why in KNOWN.items() if re.search(pattern, key)), None)
        prefix = "known difference (%s)" % reason if reason else "DIFFERS"
        lines.append("parity %s: scenario '%s', rank %d of %d, '%s': horovod gave %s, kolo "
                     "gave %s" % (prefix, scenario, rank, size, item, describe(want),
                                  describe(have)))
    return lines


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--hvd", required=True, help="horovod.torch or kolo.torch")
    parser.add_argument("--record", help="directory to write rank<r>.json into")
    parser.add_argument("--check", help="expectation file (expected/ranks_<N>.json)")
    parser.add_argument("--only", help="regex: run only the scenarios it matches")
    args = parser.parse_args()
    hvd = importlib.import_module(args.hvd)
    recording.before_init(hvd)
    hvd.init()
    rank, size = hvd.rank(), hvd.size()
    records = run(hvd, size, args.only)
    status = 0
    if args.record:
        os.makedirs(args.record, exist_ok=True)
        with open(os.path.join(args.record, "rank%d.json" % rank), "w") as out:
            json.dump(records, out, indent=0, sort_keys=True)
    if args.check:
        with open(args.check) as source:
            expected = json.load(source)
        if expected["ranks"] != size:
            raise SystemExit("%s was recorded with %d ranks, this job has %d"
                             % (args.check, expected["ranks"], size))
        want = expected["records"][rank]
        if args.only:
            want = {k: v for k, v in want.items()
                    if re.search(args.only, k.partition(":")[0])}
        lines = compare(want, records, rank, size)
        for line in lines:
            print(line, flush=True)
        failed = [line for line in lines if line.startswith("parity DIFFERS")]
        print("parity: rank %d of %d compared %d behaviours with Horovod %s: %d differ, %d "
              "known differences" % (rank, size, len(want), expected["horovod"], len(failed),
                                     len(lines) - len(failed)), flush=True)
        status = 1 if failed else 0
    hvd.shutdown()
    sys.exit(status)


if __name__ == "__main__":
    main()
