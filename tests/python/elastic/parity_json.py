"""The end of a differential test against Horovod's elastic API (elastic_parity.py here for
kolo.torch, tests/tensorflow/elastic_parity.py for kolo.tensorflow): what one library gave,
recorded as JSON (Horovod's, outside CI) or compared with the record, one line per difference.
Imports no framework, so that either venv runs it."""

import json
import re


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
        if want == have:
            continue
        why = next((entry[2] for entry in known
                    if re.search(entry[0], key) and entry[1] == want
                    and (len(entry) < 4 or expected.get(entry[3]) == have)), None)
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
