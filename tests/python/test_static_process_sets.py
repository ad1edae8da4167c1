"""init(process_sets=[...]): Horovod's static process sets, made by kolo at init as
KOLO_PROCESS_SETS makes them (ids 1, 2, ...). Run by ctest at 4 ranks with
TEST_INIT_PROCESS_SETS="0,1/2,3" (conftest.py passes them to init)."""

import os

import pytest
import torch

import kolo.torch as hvd
from kolo.torch import process_sets

pytestmark = pytest.mark.skipif(hvd.size() != 4, reason="written for 4 ranks")


def test_static_sets_have_ids_and_work(static_process_sets):
    low, high = static_process_sets
    assert (low.process_set_id, high.process_set_id) == (1, 2)
    assert os.environ["KOLO_PROCESS_SETS"] == "0,1;2,3"
    mine = low if hvd.rank() < 2 else high
    assert mine.included() and mine.size() == 2 and mine.rank() == hvd.rank() % 2
    summed = hvd.allreduce(torch.tensor([float(hvd.rank())]), op=hvd.Sum, process_set=mine)
    assert summed.item() == (1.0 if mine is low else 5.0)
    # A set added later gets the next id.
    later = hvd.add_process_set([0, 3])
    assert later.process_set_id == 3
    assert hvd.remove_process_set(later)
    # A static set is removable like any other.
    assert hvd.remove_process_set(high)
    with pytest.raises(ValueError, match="process set 2 is unknown"):
        hvd.barrier(process_set=high)


def test_init_refuses_bad_static_sets(monkeypatch):
    # What init checks before it starts anything (kolo is initialized here already).
    monkeypatch.setenv("KOLO_PROCESS_SETS", "0,1")
    with pytest.raises(ValueError, match="differ from KOLO_PROCESS_SETS"):
        process_sets._before_init([hvd.ProcessSet([0, 2])])
    monkeypatch.delenv("KOLO_PROCESS_SETS")
    with pytest.raises(ValueError, match="duplicate"):
        process_sets._before_init([hvd.ProcessSet([0, 2]), hvd.ProcessSet([2, 0])])
    with pytest.raises(ValueError, match="always there"):
        process_sets._before_init([hvd.global_process_set])
    with pytest.raises(ValueError, match="list of ProcessSet or 'dynamic'"):
        process_sets._before_init("static")
    assert process_sets._before_init("dynamic") == []
