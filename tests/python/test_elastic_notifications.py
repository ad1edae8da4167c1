"""Horovod's State.on_hosts_updated on kolo (issue 54), in a 2-rank job under kolorun: the
elastic driver's host changes reach a state through on_hosts_updated on rank 0, which polls the
driver at each commit; rank 0's view of the notifications goes to every rank, so that every
rank raises HostsUpdatedInterrupt at the same commit (skip_sync when hosts were only removed);
a notification only another rank holds does not (Horovod broadcasts rank 0's view); a reset
forgets the notifications not yet checked. The driver is a stand-in bound in place of
kolorun's (what kolo/elastic.h's poll answers); test_elastic_job.py runs the real one."""

import time

import pytest
import torch
import kolo.torch as hvd
from kolo.common import elastic

hvd.init()
RANK = hvd.rank()


class Driver:
    """What kolorun's elastic driver answers rank 0's poll: changes after `since`."""

    def __init__(self):
        self.changes = (0, 0)

    def elastic_enabled(self):
        return True

    def elastic_poll(self, since):
        timestamp, kinds = self.changes
        return (timestamp, kinds) if timestamp > since else (since, 0)


class Heard(elastic.ObjectState):
    """An ObjectState that records the notifications it is handed."""

    def __init__(self):
        self.heard = []
        super().__init__(hvd.broadcast_object, hvd.rank, step=0)

    def on_hosts_updated(self, timestamp, update_res):
        self.heard.append(elastic.HostUpdateResult(update_res))
        super().on_hosts_updated(timestamp, update_res)


@pytest.fixture
def driver():
    stand_in = Driver()
    elastic.bind(stand_in)
    yield stand_in
    elastic.bind(hvd._C)  # kolorun's (not an elastic job here)


def commit_outcome(state):
    """None when commit() went on, else the interrupt's skip_sync."""
    try:
        state.commit()
        return None
    except elastic.HostsUpdatedInterrupt as interrupt:
        return interrupt.skip_sync


def test_the_drivers_change_reaches_on_hosts_updated_and_interrupts_every_rank(driver):
    state = Heard()
    assert commit_outcome(state) is None
    driver.changes = (5, elastic.HOSTS_ADDED)  # only rank 0 asks
    assert commit_outcome(state) is False  # hosts added: the new ranks need the sync
    assert state.heard == ([elastic.HostUpdateResult.added] if RANK == 0 else [])
    assert commit_outcome(state) is None  # handed on once
    driver.changes = (9, elastic.HOSTS_REMOVED)
    assert commit_outcome(state) is True  # only removed: no sync
    assert commit_outcome(state) is None


def test_rank_0s_notifications_decide_on_every_rank(driver):
    state = Heard()
    if RANK == 1:
        state.on_hosts_updated(time.time(), elastic.HostUpdateResult.added)
    assert commit_outcome(state) is None  # rank 0 heard nothing
    if RANK == 0:
        state.on_hosts_updated(time.time(), elastic.HostUpdateResult.removed)
    assert commit_outcome(state) is True
    assert commit_outcome(state) is None


def test_a_reset_forgets_the_notifications_not_yet_checked(driver):
    state = Heard()
    state.on_hosts_updated(time.time(), elastic.HostUpdateResult.mixed)
    state.on_reset()
    assert commit_outcome(state) is None


def test_outside_an_elastic_job_a_commit_neither_raises_nor_communicates():
    state = Heard()
    if RANK == 0:  # nothing is broadcast: rank 1 commits once, rank 0 twice
        state.commit()
    state.on_hosts_updated(time.time(), elastic.HostUpdateResult.added)
    state.commit()
    total = hvd.allreduce(torch.ones(1) * (RANK + 1), op=hvd.Sum, name="notifications.after")
    assert total.item() == 3.0  # the ranks' ops still pair: nothing was broadcast
