"""HOROVOD_TIMELINE=DYNAMIC means "off until start_timeline()", as in Horovod (not a file named
DYNAMIC). Runs a one-rank job in a fresh directory."""

import os
import subprocess
import sys

SCRIPT = """
import os, torch, kolo.torch as hvd
hvd.init()
hvd.allreduce(torch.ones(2), name="untraced")
assert os.listdir(".") == [], os.listdir(".")
hvd.start_timeline("trace.json")
hvd.allreduce(torch.ones(2), name="traced")
hvd.stop_timeline()
hvd.shutdown()
"""


def test_dynamic_timeline_is_off_until_started(tmp_path):
    env = dict(os.environ, HOROVOD_TIMELINE="DYNAMIC")
    for name in ("KOLO_RANK", "KOLO_SIZE", "KOLO_CONTROLLER", "KOLO_TIMELINE"):
        env.pop(name, None)
    subprocess.run([sys.executable, "-c", SCRIPT], cwd=tmp_path, env=env, check=True,
                   timeout=60)
    assert sorted(os.listdir(tmp_path)) == ["trace.rank0.json"]
    assert "traced" in (tmp_path / "trace.rank0.json").read_text()
