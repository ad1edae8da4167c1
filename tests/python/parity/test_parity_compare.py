"""The differential test's comparison can fail: a record that differs from Horovod's in a
value's last bit, a dtype, an exception class or by its absence is reported, naming the
scenario, the rank and both values; a known difference is reported but does not fail."""

import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import parity  # noqa: E402
import recording  # noqa: E402


def records(**values):
    out = {}
    recorder = recording.Recorder("demo", out)
    for key, value in values.items():
        recorder.value(key, value)
    return out


def test_equal_records_compare_equal():
    a = records(t=torch.tensor([0.1, 0.2]), n=3)
    assert parity.compare(a, records(t=torch.tensor([0.1, 0.2]), n=3), 1, 2) == []


def test_every_kind_of_difference_is_named():
    want = records(t=torch.tensor([0.1, 0.2]), big=torch.arange(100.0), n=3, gone=1)
    last_bit = torch.tensor([0.1, 0.2]).view(torch.int32) + torch.tensor([0, 1])
    have = records(t=last_bit.view(torch.float32), big=torch.arange(100.0).double(),
                   n=True, extra=2)
    lines = parity.compare(want, have, 1, 2)
    assert len(lines) == 5, lines
    assert all(line.startswith("parity DIFFERS: scenario 'demo', rank 1 of 2") for line in lines)
    assert any("'big'" in line and "float64" in line for line in lines)
    assert any("'gone'" in line and "<absent>" in line for line in lines)
    assert any("'n'" in line and '"bool"' in line for line in lines)


def test_an_exception_class_difference_is_named():
    want, have = {}, {}
    recording.Recorder("demo", want).call("op", lambda: int("x"))
    recording.Recorder("demo", have).call("op", lambda: [][1])
    lines = parity.compare(want, have, 0, 1)
    assert len(lines) == 1 and "ValueError" in lines[0] and "IndexError" in lines[0]


def test_known_differences_are_reported_not_failed():
    parity.KNOWN.append((r"^demo:known$", lambda want, have: have["v"] == 2, "a reason"))
    try:
        lines = parity.compare(records(known=1), records(known=2), 0, 1)
        other = parity.compare(records(known=1), records(known=3), 0, 1)
    finally:
        parity.KNOWN.pop()
    assert len(lines) == 1 and lines[0].startswith("parity known difference (a reason)")
    assert len(other) == 1 and other[0].startswith("parity DIFFERS")  # not the known one


def test_a_tolerant_record_forgives_last_bits_only():
    parity.TOLERANT.append((r"^demo:t$", 1e-3, "demo"))
    try:
        want = records(t=torch.tensor([1.0, 2.0]))
        assert parity.compare(want, records(t=torch.tensor([1.0, 2.0002])), 0, 1) == []
        assert len(parity.compare(want, records(t=torch.tensor([1.0, 2.1])), 0, 1)) == 1
        assert len(parity.compare(want, records(t=torch.tensor([1.0, 2.0]).double()), 0,
                                  1)) == 1  # the dtype still counts
    finally:
        parity.TOLERANT.pop()


def test_elastic_records_forgive_the_last_float_digits_only():
    # tests/python/elastic/parity_json.py (both elastic differential tests): the weights Horovod
    # recorded on an Intel Xeon and kolo's on a CPU without AVX-512 (issue 53).
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                    "elastic"))
    import parity_json
    want = {"after_sync_step": [[11.273377, -5.172438, -41.97813]], "epoch": 1, "ok": True}
    assert parity_json.same(want, {"after_sync_step": [[11.273377, -5.172439, -41.978138]],
                                   "epoch": 1, "ok": True})
    assert not parity_json.same(want, {"after_sync_step": [[11.273377, -5.1724, -41.97813]],
                                       "epoch": 1, "ok": True})  # 7e-6 relative: a difference
    assert not parity_json.same(want, {"after_sync_step": [[11.273377, -5.172438, -41.97813]],
                                       "epoch": 2, "ok": True})  # integers are exact
    assert not parity_json.same(want, {"after_sync_step": [[11.273377, -5.172438]],
                                       "epoch": 1, "ok": True})
    assert not parity_json.same({"ok": True}, {"ok": 1.0})
