"""Horovod's hvd.elastic, which kolo does not have: the module imports (horovod.tensorflow
imports it too, so hvd.elastic resolves) and any name taken from it raises NotImplementedError."""


def __getattr__(name):
    raise NotImplementedError(
        "kolo.tensorflow.elastic.%s: kolo has no elastic training (a job is the ranks the "
        "launcher started; HOROVOD_ELASTIC=1 fails init)" % name)
