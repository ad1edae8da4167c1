"""Pure-Python pieces of kolo's framework bindings that do not depend on a framework: Horovod's
init, shutdown and identity calls over a native backend (basics), the exceptions and status
mapping (errors), Horovod's process sets over a native backend (process_sets), Horovod's
elastic State, ObjectState and retry loop (elastic), the numbering of unnamed ops both bindings
use (op_names), and the byte framing of broadcast_object / allgather_object (objects). Used by
kolo.tensorflow, and by kolo.torch for all but the object framing (kolo.torch pickles into torch
tensors, with cloudpickle where installed, as horovod.torch does)."""
