"""One rank of test_killed_rank.py's 3-rank job: the last rank kills itself (SIGKILL) after a
first allreduce; the others keep allreducing eagerly and must raise HorovodInternalError naming
it; then one more op inside a tf.function raises TensorFlow's error for a failed job. Prints
"RAISED <seconds> <message>" and "IN_FUNCTION <error type>" and exits 0 when that happens."""

import os
import signal
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf  # noqa: E402

import kolo.tensorflow as hvd  # noqa: E402

hvd.init()
hvd.allreduce(tf.ones([4]), name="before")
if hvd.rank() == hvd.size() - 1:
    os.kill(os.getpid(), signal.SIGKILL)
start = time.monotonic()
try:
    for step in range(100000):
        hvd.allreduce(tf.ones([4]), name="after.%d" % step)
except hvd.HorovodInternalError as error:
    print("RAISED %.2f %s" % (time.monotonic() - start, error), flush=True)
    try:
        tf.function(lambda: hvd.allreduce(tf.ones([4]), name="in.function"))()
    except tf.errors.OpError as in_function:
        print("IN_FUNCTION %s" % type(in_function).__name__, flush=True)
    try:
        hvd.shutdown()
    except hvd.KoloError:
        pass  # shutdown after a job-fatal error returns that error
    sys.exit(0)
print("NOT RAISED", flush=True)
sys.exit(1)
