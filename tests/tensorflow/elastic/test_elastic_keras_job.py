"""A real elastic Keras job: examples/tensorflow/elastic_keras.py (KerasState, the three
hvd.elastic callbacks, model.fit inside hvd.elastic.run) under kolorun's elastic mode with three
workers on three loopback hosts (one slot each, so that the killed worker blacklists only its
own host). One worker is SIGKILLed mid-training: the two others re-form without it, within
RECOVERY_SECONDS of the kill, and finish every epoch with the same weights. One pytest process
drives the job (kolorun's path in KOLORUN_PATH; the output reader and the deadlines are those of
the PyTorch elastic job's test, tests/python/elastic/test_elastic_job.py)."""

import os
import re
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "elastic"))
from test_elastic_job import KOLORUN, RECOVERY_SECONDS, Job  # noqa: E402

EXAMPLE = os.path.join(HERE, "..", "..", "..", "examples", "tensorflow", "elastic_keras.py")
EPOCHS = 4


@pytest.mark.skipif(not KOLORUN, reason="KOLORUN_PATH is not set (ctest sets it)")
def test_an_elastic_keras_job_survives_a_lost_worker(tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("localhost:1\n127.0.0.2:1\n127.0.0.3:1\n")
    command = [KOLORUN, "-np", "3", "--min-np", "2", "--max-np", "3",
               "--host-discovery-script", "cat %s" % hosts,
               sys.executable, EXAMPLE, "--samples", "600", "--epochs", str(EPOCHS),
               "--batch-size", "16", "--commit-every", "2", "--batch-ms", "30"]
    job = Job(command, dict(os.environ, KOLO_LOG_LEVEL="warning"))
    try:
        job.wait_for("3 ranks training", lambda: job.trained(3, 0, 3))
        killed, survivors, recovery = job.kill_mid_training(job.trained(3, 0, 3), 2,
                                                            "rank 2 was killed")
        print("recovery after killing rank 2: %.3f s" % recovery)
        assert killed not in [pid for pid, _ in survivors.values()]
        job.wait_end()
    finally:
        job.stop()
    output = "\n".join(job.lines)
    print(output)  # shown by pytest on failure
    assert job.process.returncode == 0, output[-4000:]
    assert recovery < RECOVERY_SECONDS, "recovery %.3f s" % recovery
    done = re.findall(r"done rank (\d+) of (\d+) epochs (\d+) checksum (\w+)", output)
    assert sorted((int(rank), int(size)) for rank, size, _, _ in done) == [(0, 2), (1, 2)], \
        output[-4000:]
    assert {int(epochs) for _, _, epochs, _ in done} == {EPOCHS}, done
    assert len({checksum for _, _, _, checksum in done}) == 1, done
    # Every epoch ended on the job of two after the kill (the last ones at least).
    assert re.search(r"epoch %d rank 0 of 2 " % (EPOCHS - 1), output), output[-4000:]
