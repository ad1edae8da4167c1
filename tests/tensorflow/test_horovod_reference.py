"""kolo.tensorflow against Horovod 0.28.1's own answers: every case of horovod_reference.py run
on kolo (2 ranks) must give what Horovod gave on the same inputs (horovod_expected_2_ranks.json,
recorded by running the same script under horovodrun: docs/TENSORFLOW.md), the same values,
shapes and dtypes, or an exception of the same type. Cases where kolo differs on purpose are
listed in DELIBERATE with the reason."""

import json
import os

import numpy as np
import pytest

import kolo.tensorflow as hvd
from horovod_reference import cases, describe

EXPECTED = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                        "horovod_expected_2_ranks.json")
RANK = hvd.rank()

# case -> why kolo answers differently from Horovod 0.28.1 (docs/TENSORFLOW.md).
DELIBERATE = {
    "grouped_allreduce": "kolo groups tensors of different dtypes (Horovod's grouped op has one "
                         "dtype for all and raises InvalidArgumentError)",
}


def expected():
    with open(EXPECTED) as f:
        return json.load(f)["rank%d" % RANK]


pytestmark = pytest.mark.skipif(hvd.size() != 2, reason="Horovod's answers were recorded at 2 "
                                                        "ranks")


@pytest.mark.parametrize("name", sorted(cases(hvd)) if hvd.size() == 2 else [])
def test_kolo_answers_as_horovod_did(name):
    want = expected()[name]
    fn = cases(hvd)[name]
    if name in DELIBERATE:
        fn()  # kolo's answer is checked by the other suites
        pytest.skip(DELIBERATE[name])
    if "error" in want:
        with pytest.raises(Exception) as error:
            fn()
        assert type(error.value).__name__ == want["error"], str(error.value)
        return
    compare(describe(fn()), want["result"])


def compare(got, want):
    if isinstance(want, list):
        assert isinstance(got, list) and len(got) == len(want)
        for g, w in zip(got, want):
            compare(g, w)
        return
    assert got["dtype"] == want["dtype"]
    assert got["shape"] == want["shape"]
    np.testing.assert_allclose(got["value"], want["value"], rtol=1e-3)
