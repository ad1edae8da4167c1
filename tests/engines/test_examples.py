"""kolo's ports of Horovod's Ray and Spark examples (examples/ray, examples/spark) run as a user
runs them: each its own driver process, on a two-node Ray cluster (127.0.0.2, 127.0.0.3) or on
its own Spark local-cluster. Each must exit 0 and print an accuracy a trained model has."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from ray.cluster_utils import Cluster

pytestmark = pytest.mark.slow

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples")


@pytest.fixture(scope="module")
def cluster_address():
    cluster = Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=1, node_ip_address="127.0.0.2", include_dashboard=False))
    cluster.add_node(num_cpus=1, node_ip_address="127.0.0.3")
    cluster.wait_for_nodes()
    yield cluster.address
    cluster.shutdown()


def _run(script, *args):
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, script)] + list(args),
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout[-6000:]
    return done.stdout


def _accuracies(output):
    line = [l for l in output.splitlines() if "accuracy" in l][-1]
    return [float(a) for a in re.findall(r"\d\.\d{3}", line)]


def test_ray_executor_example(cluster_address):
    output = _run("ray/pytorch_ray_digits.py", "--address", cluster_address, "--num-hosts", "2",
                  "--workers-per-host", "1", "--epochs", "3")
    accuracies = _accuracies(output)
    assert len(accuracies) == 2 and min(accuracies) > 0.8, output[-3000:]


def test_elastic_ray_executor_example(cluster_address):
    output = _run("ray/pytorch_ray_elastic.py", "--address", cluster_address, "--epochs", "2",
                  "--min-workers", "2", "--num-batches-per-commit", "4")
    accuracies = _accuracies(output)
    assert len(accuracies) == 2 and min(accuracies) > 0.8, output[-3000:]


def test_spark_run_example():
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, os.path.join(EXAMPLES, "spark",
                                                        "pytorch_spark_digits.py"),
                           "--master", "local-cluster[2,1,1024]", "--num-proc", "2"],
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          timeout=600, env=env)
    assert done.returncode == 0, done.stdout[-6000:]
    line = [l for l in done.stdout.splitlines() if l.startswith("accuracy")][-1]
    assert float(line.split()[1]) > 0.8 and "on 2 ranks" in line, done.stdout[-3000:]
