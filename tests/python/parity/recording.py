"""What the differential test (parity.py) records and how: the scenario registry, the
Recorder and the encoding of results. A scenario (scenarios_ops.py, scenarios_api.py) is a
function of (hvd, rec) that calls Horovod's torch API on `hvd` exactly as a user's script
would, and records what it got with `rec`. The same code runs under horovodrun with
horovod.torch and under kolorun with kolo.torch. Every rank runs every scenario of its job size
in the same order.

Inputs are chosen so that Horovod's results do not depend on the order in which ranks' values
are added (small integers, or one non-zero addend per element: see `spread`): then kolo must
give the very same bits. Ops are named per scenario so that one scenario's failure cannot
shift the next one's ops; the unnamed ones are in the scenarios about naming.
"""

import hashlib
import json
import math
import os

import torch

SCENARIOS = []

DTYPES = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64, torch.float16,
          torch.bfloat16, torch.float32, torch.float64, torch.bool]
FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
INTS = [torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64]


class Scenario:
    def __init__(self, function, min_ranks, ranks, last):
        self.function, self.name = function, function.__name__
        self.min_ranks, self.ranks, self.last = min_ranks, ranks, last


def scenario(min_ranks=1, ranks=None, last=0):
    """Registers a scenario for jobs of min_ranks or more (or only of `ranks`). Scenarios run
    in order of `last`, then of registration: those in which ranks make different calls run
    after the others (1), the join one after all (2), because Horovod numbers unnamed ops by
    its handles, which every call takes, so that its unnamed ops never pair again after them."""
    def register(function):
        SCENARIOS.append(Scenario(function, min_ranks, ranks, last))
        return function
    return register


_INTERNAL_ERROR = ()  # hvd.HorovodInternalError, once before_init saw hvd


def before_init(hvd):
    """What every script does before init: Horovod adds process sets only with this."""
    global _INTERNAL_ERROR
    _INTERNAL_ERROR = hvd.HorovodInternalError
    os.environ["HOROVOD_DYNAMIC_PROCESS_SETS"] = "1"


def builtin_class(error):
    """The Python built-in class `error` is (KoloError, HorovodInternalError: RuntimeError)."""
    return next(c.__name__ for c in type(error).__mro__ if c.__module__ == "builtins")


def dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def encode(value):
    """A JSON-able record of `value`: exact for tensors and Python scalars, with their types."""
    if isinstance(value, torch.Tensor):
        record = {"dtype": dtype_name(value.dtype), "shape": list(value.shape)}
        if value.requires_grad:
            record["requires_grad"] = True
        if value.is_sparse:
            value = value.coalesce()
            record["sparse"] = [encode(value.indices()), encode(value.values())]
            return record
        flat = value.detach().cpu().contiguous().reshape(-1)
        if flat.numel() <= 16:
            record["v"] = flat.tolist()
        else:
            data = flat.view(torch.uint8) if flat.dtype != torch.bool else flat.to(torch.uint8)
            record["sha"] = hashlib.sha256(bytes(data.numpy())).hexdigest()[:20]
            record["head"] = flat[:4].tolist()
        return record
    if isinstance(value, (list, tuple)):
        return {"seq": type(value).__name__, "items": [encode(v) for v in value]}
    if isinstance(value, dict):
        return {"dict": {str(k): encode(v) for k, v in value.items()}}
    if value is None or isinstance(value, (bool, int, float, str)):
        return {"py": type(value).__name__, "v": value}
    return {"py": type(value).__name__, "repr": repr(value)[:100]}


def close_record(value):
    """A record compared with a tolerance (Recorder.close): where Horovod's numerics depend on
    its kernels' order of operations (SyncBatchNorm's statistics), not only on the data."""
    if isinstance(value, torch.Tensor):
        return {"dtype": dtype_name(value.dtype), "shape": list(value.shape),
                "close": value.detach().double().reshape(-1).tolist()}
    if isinstance(value, (list, tuple)):
        return {"seq": type(value).__name__, "items": [close_record(v) for v in value]}
    return encode(value)


def _close(want, have):
    if isinstance(want, dict) and isinstance(have, dict):
        if "close" in want and "close" in have:
            a, b = want["close"], have["close"]
            return want.keys() == have.keys() and len(a) == len(b) and all(
                math.isclose(x, y, rel_tol=1e-5, abs_tol=1e-6) for x, y in zip(a, b)) and \
                {k: v for k, v in want.items() if k != "close"} == \
                {k: v for k, v in have.items() if k != "close"}
        return want.keys() == have.keys() and all(_close(want[k], have[k]) for k in want)
    if isinstance(want, list) and isinstance(have, list):
        return len(want) == len(have) and all(_close(a, b) for a, b in zip(want, have))
    return want == have


def within(want, have, rel_tol):
    """Whether two records are equal but for their tensors' values, which may differ by
    rel_tol (relative to the larger) or 1e-6 (absolute)."""
    if isinstance(want, dict) and isinstance(have, dict):
        if want.keys() != have.keys():
            return False
        return all(within(want[k], have[k], rel_tol) for k in want)
    if isinstance(want, list) and isinstance(have, list):
        return len(want) == len(have) and all(within(a, b, rel_tol) for a, b in zip(want, have))
    if isinstance(want, float) and isinstance(have, float):
        return math.isclose(want, have, rel_tol=rel_tol, abs_tol=1e-6)
    return want == have


def same(want, have):
    if json.dumps(want, sort_keys=True) == json.dumps(have, sort_keys=True):
        return True
    return _close(want, have) and "close" in json.dumps(want)


class Recorder:
    """Records of one scenario, keyed "scenario:key", into a shared dict."""

    def __init__(self, scenario_name, records):
        self.scenario, self.records = scenario_name, records

    def value(self, key, value):
        full = "%s:%s" % (self.scenario, key)
        if full in self.records:
            raise KeyError("recorded twice: " + full)
        self.records[full] = json.loads(json.dumps(encode(value)))

    def close(self, key, function):
        """Like call, but tensors are compared with a tolerance (close_record)."""
        try:
            result = function()
        except Exception as error:
            self.records["%s:%s" % (self.scenario, key)] = {"raises": builtin_class(error)}
            return None
        self.records["%s:%s" % (self.scenario, key)] = json.loads(json.dumps(
            close_record(result)))
        return result

    def call(self, key, function, words=()):
        """Records what function() returns, or the class of what it raises (and which of
        `words` its message contains, lower-cased). Returns the result (None if it raised)."""
        try:
            result = function()
        except Exception as error:
            record = {"raises": builtin_class(error)}
            if isinstance(error, _INTERNAL_ERROR):
                record["internal"] = True
            message = str(error).lower()
            if words:
                record["words"] = [w for w in words if w in message]
            full = "%s:%s" % (self.scenario, key)
            self.records[full] = record
            return None
        self.value(key, result)
        return result


def spread(hvd, values, dtype):
    """A tensor whose element i is values[i] on rank i % size and zero elsewhere: any sum
    over the ranks has one non-zero addend per element, so it is exact in any order."""
    tensor = torch.zeros(len(values), dtype=torch.float64)
    for i, v in enumerate(values):
        if i % hvd.size() == hvd.rank():
            tensor[i] = v
    return tensor.to(dtype)


def ranked(hvd, n, dtype, offset=1):
    """arange(n) + rank + offset (bool: its parity), in `dtype`."""
    tensor = torch.arange(n, dtype=torch.int64) + hvd.rank() + offset
    return (tensor % 2).to(torch.bool) if dtype == torch.bool else tensor.to(dtype)

