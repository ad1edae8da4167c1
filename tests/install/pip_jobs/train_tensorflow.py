"""pip_install_test.sh's TensorFlow job, a Horovod TensorFlow 2 script (GradientTape) with its
import changed, run as `<venv>/bin/kolorun -np 2 <venv>/bin/python train_tensorflow.py` from a
folder outside the source tree, without PYTHONPATH: kolo must come from the venv pip installed
it into. Each rank starts from its own random weights and trains on its own data; the weights
end identical, which every rank checks. Prints
"train_tensorflow: rank R of N ok: weights W, kolo from P"."""

import sys

import tensorflow as tf

import kolo.tensorflow as hvd  # with Horovod: import horovod.tensorflow as hvd

hvd.init()
tf.random.set_seed(1000 + hvd.rank())
model = tf.keras.Sequential([tf.keras.Input(shape=(8,)),
                             tf.keras.layers.Dense(16, activation="relu"),
                             tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(learning_rate=0.01 * hvd.size())
hvd.broadcast_variables(model.variables, root_rank=0)

data = tf.random.Generator.from_seed(7 + hvd.rank())
for step in range(20):
    x = data.normal((32, 8))
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x) - tf.reduce_sum(x, axis=1, keepdims=True)))
    tape = hvd.DistributedGradientTape(tape)
    gradients = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(gradients, model.trainable_variables))

weights = float(sum(tf.reduce_sum(tf.cast(v, tf.float64)) for v in model.variables))
everyone = hvd.allgather_object(weights)
if any(w != everyone[0] for w in everyone):
    sys.exit("train_tensorflow: rank %d: the ranks' weights differ: %s" % (hvd.rank(), everyone))
print("train_tensorflow: rank %d of %d ok: weights %.6f, kolo from %s"
      % (hvd.rank(), hvd.size(), weights, hvd.__file__), flush=True)
hvd.shutdown()
