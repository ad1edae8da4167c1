"""The end of a differential test against Horovod's elastic API (elastic_parity.py here for
kolo.torch, tests/tensorflow/elastic_parity.py for kolo.tensorflow): what one library gave,
recorded as JSON (Horovod's, outside CI) or compared with the record, one line per difference;
floats within a stated tolerance (REL_TOL). Imports no framework, so that either venv runs
it."""

import json
import math
import re

# Recorded floats are compared within this tolerance, not bit for bit. Why: a record holds
# float32 weights after a few training steps (rounded to 6 decimals), computed by the framework's
# CPU kernels, whose order of additions and use of fused multiply-adds depends on the vector
# instructions the CPU has. Horovod's answers were recorded on an Intel Xeon with AVX-512; an
# AMD EPYC without it (or ONEDNN_MAX_CPU_ISA=AVX2 on one with it) gives the same weights but for
# the last digit: -5.172439 against -5.172438, -41.978138 against -41.97813 (issue 53), 2 ulps of
# float32 (2^-23 = 1.2e-7 relative each). REL_TOL 1e-6 is about 8 ulps, room for the few
# roundings of a few steps; ABS_TOL 1e-6 covers the 6-decimal rounding of values near zero. A
# real difference in behaviour (a gradient not averaged, a step skipped or applied twice, a
# state not restored) moves these weights by 1e-2 or more. Integers, strings and booleans are
# compared exactly.
REL_TOL = 1e-6
ABS_TOL = 1e-6


def same(want, have):
    """Whether two records agree: exactly, but floats within REL_TOL / ABS_TOL (see above)."""
    if isinstance(want, dict) and isinstance(have, dict):
        return want.keys() == have.keys() and all(same(want[k], have[k]) for k in want)
    if isinstance(want, list) and isinstance(have, list):
        return len(want) == len(have) and all(same(a, b) for a, b in zip(want, have))
    if isinstance(want, bool) or isinstance(have, bool):  # not 1 or 1.0
        return type(want) is type(have) and want == have
    if isinstance(want, (int, float)) and isinstance(have, (int, float)) and \
            (isinstance(want, float) or isinstance(have, float)):
        return math.isclose(want, have, rel_tol=REL_TOL, abs_tol=ABS_TOL)
    return want == have


def finish(out, record, check, known):
    """Writes `out` (behaviour -> what the library gave) to `record`, or compares it with the
    JSON in `check` and prints one line per difference. `known`: the differences kept on
    purpose, (key regex, what Horovod gave, why[, the key whose Horovod answer kolo's must equal
    instead]). Returns the exit status: 1 when a difference is not known."""
    out = json.loads(json.dumps(out))  # tuples as lists, as recorded
    if record:
        with open(record, "w") as sink:
            sink.write("{\n" + ",\n".join("%s: %s" % (json.dumps(k), json.dumps(v))
                                          for k, v in sorted(out.items())) + "\n}\n")
        print("recorded %d behaviours" % len(out))
        return 0
    with open(check) as source:
        expected = json.load(source)
    differ = 0
    for key in sorted(set(expected) | set(out)):
        want, have = expected.get(key, "<absent>"), out.get(key, "<absent>")
        if same(want, have):
            continue
        why = next((entry[2] for entry in known
                    if re.search(entry[0], key) and same(entry[1], want)
                    and (len(entry) < 4 or same(expected.get(entry[3]), have))), None)
        if why is not None:
            print("elastic parity: known difference '%s' (%s): horovod %s, kolo %s"
                  % (key, why, json.dumps(want), json.dumps(have)[:400]))
            continue
        differ += 1
        print("elastic parity DIFFERS '%s': horovod gave %s, kolo gave %s"
              % (key, json.dumps(want)[:400], json.dumps(have)[:400]))
    print("elastic parity: compared %d behaviours with Horovod: %d differ"
          % (len(expected), differ))
    return 1 if differ else 0
