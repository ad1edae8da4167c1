"""kolo.runner.run (Horovod's horovod.runner.run): a function run on 2 ranks through kolorun
(real processes; this pytest process is the caller) returns each rank's value in rank order;
args and kwargs reach it; a rank that raises makes run() raise RuntimeError naming it and its
error, within a bound; a function of the calling script runs (loaded as multiprocessing's spawn
loads it); Horovod's argument checks. kolorun is found through KOLORUN_PATH (ctest sets it)."""

import os
import subprocess
import sys
import time

import pytest
import kolo.runner

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import functions  # noqa: E402


def test_each_ranks_return_value_comes_back_in_rank_order():
    results = kolo.runner.run(functions.allreduce_rank, args=(2.0,), kwargs={"offset": 1},
                              num_proc=2)
    assert [r[:3] for r in results] == [(0, 2, 7.0), (1, 2, 7.0)]
    assert results[0][3] != results[1][3] != os.getpid()  # two processes of their own


def test_np_is_horovods_deprecated_name_for_num_proc():
    with pytest.warns(DeprecationWarning, match="np is deprecated"):
        results = kolo.runner.run(functions.allreduce_rank, args=(1.0,), np=2)
    assert [r[0] for r in results] == [0, 1]


def test_a_rank_that_raises_is_named():
    start = time.monotonic()
    with pytest.raises(RuntimeError, match=r"rank 1 raised ValueError: rank 1 gives up"):
        kolo.runner.run(functions.fail_on_rank_1, num_proc=2)
    # kolorun stops rank 0 at once (SIGTERM), not after its 30 s.
    assert time.monotonic() - start < 20


def test_a_function_of_the_calling_script_runs():
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "main_script.py")
    output = subprocess.run([sys.executable, script], capture_output=True, text=True,
                            timeout=120)
    assert "RESULTS [(0, 49), (1, 49)]" in output.stdout, output.stdout + output.stderr


def test_horovods_argument_checks():
    with pytest.raises(ValueError, match="hosts and hostfile"):
        kolo.runner.run(functions.allreduce_rank, hosts="localhost:2", hostfile="h")
    with pytest.raises(ValueError, match="use_gloo and use_mpi"):
        kolo.runner.run(functions.allreduce_rank, use_gloo=True, use_mpi=True)
    with pytest.raises(ValueError, match="no MPI controller"):
        kolo.runner.run(functions.allreduce_rank, use_mpi=True)


def test_a_lambda_needs_cloudpickle_as_in_horovod():
    try:
        import cloudpickle  # noqa: F401
    except ImportError:
        with pytest.raises(ValueError, match="install cloudpickle"):
            kolo.runner.run(lambda: 1, num_proc=2)
        return
    assert kolo.runner.run(lambda: os.environ["KOLO_RANK"], num_proc=2) == ["0", "1"]
