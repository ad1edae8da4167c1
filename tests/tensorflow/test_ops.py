"""Every op of kolo.tensorflow at the suite's rank count (1, 2 or 4), eagerly and inside
tf.function: results, shapes and dtypes as Horovod's, errors with kolo's message."""

import numpy as np
import pytest
import tensorflow as tf

import kolo.tensorflow as hvd

RANK = hvd.rank()
SIZE = hvd.size()

DTYPES = [tf.uint8, tf.int8, tf.uint16, tf.int16, tf.int32, tf.int64, tf.float16, tf.bfloat16,
          tf.float32, tf.float64]
FLOATS = [tf.float16, tf.bfloat16, tf.float32, tf.float64]


def values(shape, dtype, rank=RANK):
    """Small distinct values per rank that every dtype holds exactly."""
    count = int(np.prod(shape))
    base = (np.arange(count) % 5 + rank + 1).reshape(shape)
    return tf.constant(base, dtype=dtype)


def expected_reduce(shape, dtype, reduce):
    stack = np.stack([values(shape, tf.float64, r).numpy() for r in range(SIZE)])
    return reduce(stack, axis=0)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_allreduce_sums_every_dtype(dtype):
    result = hvd.allreduce(values([3, 4], dtype), op=hvd.Sum)
    assert result.dtype == dtype and result.shape == (3, 4)
    np.testing.assert_allclose(result.numpy().astype(np.float64),
                               expected_reduce([3, 4], dtype, np.sum))


@pytest.mark.parametrize("op,reduce", [(hvd.Min, np.min), (hvd.Max, np.max),
                                       (hvd.Product, np.prod)])
@pytest.mark.parametrize("dtype", [tf.int32, tf.float32, tf.float64], ids=lambda d: d.name)
def test_allreduce_min_max_product(op, reduce, dtype):
    result = hvd.allreduce(values([5], dtype), op=op)
    np.testing.assert_allclose(result.numpy(), expected_reduce([5], dtype, reduce))


@pytest.mark.parametrize("dtype", FLOATS, ids=lambda d: d.name)
def test_allreduce_averages_by_default(dtype):
    result = hvd.allreduce(values([7], dtype))
    np.testing.assert_allclose(result.numpy().astype(np.float64),
                               expected_reduce([7], dtype, np.mean), rtol=1e-2)


def test_allreduce_applies_prescale_and_postscale():
    result = hvd.allreduce(values([4], tf.float64), op=hvd.Sum, prescale_factor=0.5,
                           postscale_factor=3.0)
    np.testing.assert_allclose(result.numpy(), expected_reduce([4], tf.float64, np.sum) * 1.5)


def test_allreduce_of_bool_is_logical_or():
    flags = tf.constant([RANK == 0, False, True])
    result = hvd.allreduce(flags, op=hvd.Sum)
    assert result.dtype == tf.bool
    assert result.numpy().tolist() == [True, False, True]


def test_allreduce_of_an_empty_tensor_and_a_scalar():
    empty = hvd.allreduce(tf.zeros([0, 3]), op=hvd.Sum)
    assert empty.shape == (0, 3)
    scalar = hvd.allreduce(tf.constant(float(RANK + 1)), op=hvd.Sum)
    assert scalar.shape == () and scalar.numpy() == sum(range(1, SIZE + 1))


def test_allreduce_inside_tf_function_names_each_call_site():
    @tf.function
    def step(x):
        return hvd.allreduce(x, op=hvd.Sum), hvd.allreduce(x * 2, op=hvd.Sum)

    for _ in range(3):  # the same names every call: kolo's cache, no duplicates in flight
        a, b = step(values([6], tf.float32))
        np.testing.assert_allclose(a.numpy(), expected_reduce([6], tf.float32, np.sum))
        np.testing.assert_allclose(b.numpy(), 2 * expected_reduce([6], tf.float32, np.sum))


def test_allreduce_of_a_constant_inside_tf_function():
    # Stateless, as Horovod's ops: whether or not TensorFlow's optimizer folds the constant
    # away, every rank runs the same collectives and gets the sum.
    @tf.function
    def reduce_constant():
        return hvd.allreduce(tf.constant([1.0, 2.0]), op=hvd.Sum)
    for _ in range(2):
        assert reduce_constant().numpy().tolist() == [SIZE, 2.0 * SIZE]


def test_allreduce_of_a_variable_and_of_indexed_slices():
    variable = tf.Variable(values([2], tf.float32))
    np.testing.assert_allclose(hvd.allreduce(variable, op=hvd.Sum).numpy(),
                               expected_reduce([2], tf.float32, np.sum))
    slices = tf.IndexedSlices(tf.constant([[float(RANK)] * 3]), tf.constant([RANK]),
                              dense_shape=tf.constant([SIZE, 3]))
    reduced = hvd.allreduce(slices)  # Average: values / size
    assert isinstance(reduced, tf.IndexedSlices)
    assert reduced.indices.numpy().tolist() == list(range(SIZE))
    np.testing.assert_allclose(reduced.values.numpy()[:, 0], np.arange(SIZE) / SIZE)
    dense = tf.convert_to_tensor(reduced)
    np.testing.assert_allclose(dense.numpy()[:, 0], np.arange(SIZE) / SIZE)


def test_allreduce_with_fp16_compression_keeps_the_dtype():
    result = hvd.allreduce(values([8], tf.float32), op=hvd.Sum,
                           compression=hvd.Compression.fp16)
    assert result.dtype == tf.float32
    np.testing.assert_allclose(result.numpy(), expected_reduce([8], tf.float32, np.sum))


def test_grouped_allreduce_reduces_mixed_dtypes_together():
    tensors = [values([3], tf.float32), values([2, 2], tf.int64), values([1], tf.float64)]
    results = hvd.grouped_allreduce(tensors, op=hvd.Sum)
    for tensor, result in zip(tensors, results):
        assert result.dtype == tensor.dtype and result.shape == tensor.shape
        np.testing.assert_allclose(result.numpy(),
                                   expected_reduce(tensor.shape, tf.float64, np.sum))
    assert hvd.grouped_allreduce([]) == []


@pytest.mark.parametrize("dtype", DTYPES + [tf.bool], ids=lambda d: d.name)
def test_allgather_concatenates_different_first_dimensions(dtype):
    rows = RANK + 1
    mine = tf.cast(tf.fill([rows, 2], RANK + 1), dtype)
    result = hvd.allgather(mine)
    assert result.dtype == dtype and result.shape == (SIZE * (SIZE + 1) // 2, 2)
    expected = np.concatenate([np.full([r + 1, 2], r + 1) for r in range(SIZE)])
    np.testing.assert_array_equal(result.numpy().astype(np.int64),
                                  expected.astype(dtype.as_numpy_dtype).astype(np.int64))


def test_allgather_in_tf_function_has_an_unknown_first_dimension():
    @tf.function(input_signature=[tf.TensorSpec([None, 3], tf.float32)])
    def gather(x):
        result = hvd.allgather(x)
        assert result.shape.as_list() == [None, 3]
        return result
    result = gather(tf.ones([RANK + 1, 3]))
    assert result.shape == (SIZE * (SIZE + 1) // 2, 3)


def test_grouped_allgather_gathers_each_tensor():
    results = hvd.grouped_allgather([tf.fill([1], RANK), tf.fill([2, 2], float(RANK))])
    assert results[0].numpy().tolist() == list(range(SIZE))
    assert results[1].shape == (2 * SIZE, 2)


def test_allgather_of_a_scalar_fails_as_in_horovod():
    with pytest.raises(tf.errors.FailedPreconditionError, match="scalar"):
        hvd.allgather(tf.constant(1.0))


@pytest.mark.parametrize("dtype", DTYPES + [tf.bool], ids=lambda d: d.name)
def test_broadcast_from_every_root(dtype):
    for root in range(SIZE):
        result = hvd.broadcast(tf.cast(values([2, 3], tf.int32), dtype), root_rank=root)
        assert result.dtype == dtype
        expected = tf.cast(values([2, 3], tf.int32, rank=root), dtype)
        np.testing.assert_array_equal(result.numpy(), expected.numpy())


def test_broadcast_inside_tf_function_and_broadcast_():
    @tf.function
    def bcast(x):
        return hvd.broadcast(x, 0)
    np.testing.assert_array_equal(bcast(values([4], tf.float32)).numpy(),
                                  values([4], tf.float32, rank=0).numpy())
    variables = [tf.Variable(values([3], tf.float32)), tf.Variable(float(RANK))]
    hvd.broadcast_(variables, root_rank=SIZE - 1)
    np.testing.assert_array_equal(variables[0].numpy(),
                                  values([3], tf.float32, rank=SIZE - 1).numpy())
    assert variables[1].numpy() == SIZE - 1


def test_broadcast_with_a_root_outside_the_job_fails():
    with pytest.raises(tf.errors.InvalidArgumentError, match="root"):
        hvd.broadcast(tf.ones([2]), root_rank=SIZE)


def test_alltoall_with_splits_returns_the_received_splits():
    # Rank r sends d + 1 rows to rank d, each row holding r.
    splits = [d + 1 for d in range(SIZE)]
    tensor = tf.fill([sum(splits), 2], float(RANK))
    output, received = hvd.alltoall(tensor, splits=splits)
    assert received.dtype == tf.int32
    assert received.numpy().tolist() == [RANK + 1] * SIZE
    expected = np.concatenate([np.full([RANK + 1, 2], r) for r in range(SIZE)])
    np.testing.assert_array_equal(output.numpy(), expected)


def test_alltoall_without_splits_splits_evenly():
    tensor = tf.reshape(tf.range(SIZE * 2, dtype=tf.int64) + 100 * RANK, [SIZE * 2, 1])
    output = hvd.alltoall(tensor)
    expected = [[100 * r + 2 * RANK + i] for r in range(SIZE) for i in range(2)]
    assert output.numpy().tolist() == expected


def test_alltoall_inside_tf_function():
    @tf.function
    def exchange(x, splits):
        return hvd.alltoall(x, splits=splits)
    output, received = exchange(tf.fill([SIZE], RANK), tf.ones([SIZE], tf.int32))
    assert output.numpy().tolist() == list(range(SIZE))
    assert received.numpy().tolist() == [1] * SIZE


@pytest.mark.parametrize("rows", [SIZE * 2, SIZE * 2 + 1, 1])
def test_reducescatter_gives_each_rank_its_part(rows):
    tensor = tf.reshape(tf.range(rows * 2, dtype=tf.float32) * (RANK + 1), [rows, 2])
    result = hvd.reducescatter(tensor, op=hvd.Sum)
    total = np.arange(rows * 2, dtype=np.float32).reshape(rows, 2) * (SIZE * (SIZE + 1) / 2)
    parts = np.array_split(total, SIZE)
    np.testing.assert_allclose(result.numpy(), parts[RANK])
    averaged = hvd.reducescatter(tensor)  # Average by default
    np.testing.assert_allclose(averaged.numpy(), parts[RANK] / SIZE, rtol=1e-6)


def test_grouped_reducescatter_and_inside_tf_function():
    @tf.function
    def scatter(a, b):
        return hvd.grouped_reducescatter([a, b], op=hvd.Sum)
    a, b = scatter(tf.ones([SIZE * 3, 2]), tf.ones([SIZE], tf.int32))
    assert a.shape == (3, 2) and a.numpy().max() == SIZE
    assert b.numpy().tolist() == [SIZE]


@pytest.mark.skipif(SIZE == 1, reason="needs two ranks to disagree")
def test_mismatched_shapes_fail_on_every_rank_and_the_job_goes_on():
    with pytest.raises(tf.errors.FailedPreconditionError) as error:
        hvd.allreduce(tf.ones([RANK + 1]), name="mismatch.shape", op=hvd.Sum)
    assert "mismatch.shape" in str(error.value) and "rank 1" in str(error.value)
    result = hvd.allreduce(tf.ones([2]), name="after.mismatch", op=hvd.Sum)
    assert result.numpy().tolist() == [SIZE, SIZE]


@pytest.mark.skipif(SIZE == 1, reason="needs two ranks to disagree")
def test_mismatched_dtypes_fail_inside_tf_function():
    @tf.function
    def reduce(x):
        return hvd.allreduce(x, name="mismatch.dtype", op=hvd.Sum)
    with pytest.raises(tf.errors.FailedPreconditionError, match="mismatch.dtype"):
        reduce(tf.ones([2], tf.float32 if RANK == 0 else tf.float64))


def test_unsupported_ops_and_dtypes_are_refused():
    with pytest.raises(NotImplementedError):
        hvd.allreduce(tf.ones([2]), op=hvd.Adasum)
    with pytest.raises(ValueError):
        hvd.allreduce(tf.ones([2]), op=17)
    with pytest.raises((TypeError, tf.errors.InvalidArgumentError)):
        hvd.allreduce(tf.constant(["a", "b"]), op=hvd.Sum)


def test_join_returns_the_last_rank_and_barrier_returns():
    last = hvd.join()
    assert last.dtype == tf.int32 and 0 <= int(last) < SIZE
    hvd.barrier()


def test_identity_ops_read_kolo_when_they_run():
    @tf.function
    def identity():
        return (hvd.size_op(), hvd.rank_op(), hvd.local_size_op(), hvd.local_rank_op(),
                hvd.process_set_included_op(0))
    assert [int(v) for v in identity()] == [SIZE, RANK, hvd.local_size(), hvd.local_rank(), 1]
    assert int(hvd.process_set_included_op(12345)) == -2
    with pytest.raises(tf.errors.InvalidArgumentError, match="unknown"):
        hvd.size_op(process_set_id=12345)


def test_identity_and_build_queries():
    assert 0 <= hvd.rank() < hvd.size() and hvd.is_initialized()
    assert hvd.local_size() * hvd.cross_size() == SIZE and hvd.is_homogeneous()
    assert not hvd.mpi_built() and not hvd.gloo_built() and not hvd.cuda_built()
    hvd.init()  # a second init does nothing
    assert hvd.size() == SIZE


@pytest.mark.skipif(SIZE == 1, reason="needs a rank that joins while others reduce")
def test_a_joined_rank_contributes_zeros_until_all_join():
    if RANK != 0:
        # Every rank but 0 reduces; rank 0 has joined and adds zeros.
        result = hvd.allreduce(tf.ones([2]), op=hvd.Sum, name="join.others")
        assert result.numpy().tolist() == [SIZE - 1] * 2
    last = int(hvd.join())
    assert 1 <= last < SIZE  # rank 0 joined first


def test_timeline_writes_this_ranks_file(tmp_path):
    path = tmp_path / "timeline.json"
    hvd.start_timeline(str(path))
    hvd.allreduce(tf.ones([3]), op=hvd.Sum, name="timeline.op")
    hvd.stop_timeline()
    written = tmp_path / ("timeline.rank%d.json" % RANK)
    assert "timeline.op" in written.read_text()
