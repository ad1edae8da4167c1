"""A script whose own function kolo.runner.run runs (pickled as __main__.square): the ranks
load this file as a module first, as multiprocessing's spawn does. Prints the results."""

import os

import kolo.runner


def square(x):
    return (int(os.environ["KOLO_RANK"]), x * x)


if __name__ == "__main__":
    print("RESULTS", kolo.runner.run(square, args=(7,), np=2), flush=True)
