"""Horovod's horovod.spark.run example (examples/spark/keras/keras_spark_rossmann_run.py: a
training function run on Spark executors, the model passed in as bytes and returned from rank
0), in PyTorch on kolo. A Horovod script changes only its imports (`import kolo.spark`,
`import kolo.torch as hvd`); this port trains on the 8x8 digits that ship with kolo
(examples/data/digits.csv) instead of the Rossmann data set, which it reads through Spark.

    python examples/spark/pytorch_spark_digits.py --master local-cluster[2,1,1024] --num-proc 2
"""

import argparse
import io
import os

import torch
from pyspark.sql import SparkSession

import kolo.spark  # with Horovod: import horovod.spark

DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "digits.csv")

parser = argparse.ArgumentParser(description="PyTorch on Spark (kolo)")
parser.add_argument("--master", default="local[2]", help="Spark master")
parser.add_argument("--num-proc", type=int, default=2, help="ranks (Spark tasks)")
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batch-size", type=int, default=32)
parser.add_argument("--data", default=DATA)


def serialize_model(model):
    buffer = io.BytesIO()
    torch.save(model, buffer)
    return buffer.getvalue()


def train_fn(model_bytes, rows, epochs, batch_size):
    import kolo.torch as hvd  # with Horovod: import horovod.torch as hvd
    hvd.init()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.load(io.BytesIO(model_bytes), weights_only=False)
    data = torch.tensor(rows, dtype=torch.float32)[hvd.rank()::hvd.size()]
    features, labels = data[:, :64] / 16.0, data[:, 64].long()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3 * hvd.size())
    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())
    hvd.broadcast_parameters(model.state_dict(), root_rank=0)
    for epoch in range(epochs):
        for start in range(0, len(labels), batch_size):
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(features[start:start + batch_size]),
                                                     labels[start:start + batch_size])
            loss.backward()
            optimizer.step()
        loss = hvd.allreduce(loss.detach(), name="loss").item()
        if hvd.rank() == 0:
            print("epoch %d loss %.4f" % (epoch, loss))
    accuracy = hvd.allreduce((model(features).argmax(1) == labels).float().mean(),
                             name="accuracy").item()
    # Like the Horovod example: rank 0 returns the trained model.
    return (serialize_model(model), accuracy) if hvd.rank() == 0 else (None, accuracy)


if __name__ == "__main__":
    args = parser.parse_args()
    spark = SparkSession.builder.master(args.master).appName("kolo digits").getOrCreate()
    df = spark.read.csv(args.data, inferSchema=True)
    rows = [list(row) for row in df.collect()]
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.ReLU(), torch.nn.Linear(64, 10))
    results = kolo.spark.run(train_fn, args=(serialize_model(model), rows, args.epochs,
                                             args.batch_size), num_proc=args.num_proc)
    trained = torch.load(io.BytesIO(results[0][0]), weights_only=False)
    print("accuracy %.3f on %d ranks; trained model has %d parameters" % (
        results[0][1], len(results), sum(p.numel() for p in trained.parameters())))
    spark.stop()
