"""hvd.elastic.run's sync after a reset (kolo.common.elastic.run_fn; kolo issue 53, F6). In
kolorun's elastic job the generation after a removal-only commit may hold a newcomer, or a
survivor that restored, which must be sent the state: every reset syncs there, or the ranks
that skip would wait for ever beside those that sync. Outside one, Horovod's skip holds. No
torch, no ranks: a stand-in for the binding's native calls and a State that records."""

import kolo.common.elastic as common


class Native:
    """What the binding's native module answers: in an elastic job or not, no host changes."""

    def __init__(self, enabled):
        self.enabled = enabled

    def elastic_enabled(self):
        return self.enabled

    def elastic_poll(self, since):
        return (since, 0)


class Recorded(common.State):
    def __init__(self):
        super().__init__(bcast_object=lambda value: value, get_rank=lambda: 0)
        self.events = []

    def save(self):
        self.events.append("save")

    def restore(self):
        self.events.append("restore")

    def sync(self):
        self.events.append("sync")


def events_after_removal_only(in_elastic_job):
    previous = common._native
    common.bind(Native(in_elastic_job))
    try:
        state = Recorded()
        attempts = []

        def train(state):
            attempts.append(len(attempts))
            if len(attempts) == 1:
                raise common.HostsUpdatedInterrupt(True)  # hosts were only removed
            return "done"

        resets = []
        assert common.run_fn(train, lambda: resets.append("reset"))(state) == "done"
        assert resets == ["reset"]
        return state.events
    finally:
        common._native = previous


def test_a_reset_after_a_removal_syncs_in_an_elastic_job():
    assert events_after_removal_only(True) == ["sync", "sync"]


def test_outside_an_elastic_job_a_removal_skips_the_sync_as_horovod():
    assert events_after_removal_only(False) == ["sync"]
