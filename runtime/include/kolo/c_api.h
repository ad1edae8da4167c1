/* kolo's C API: the default runtime of kolo/kolo.h for C programs and foreign-function
 * bindings; valid C99 (and C++). Every function may be called from any thread; the *_async
 * forms return at once and run `done` exactly once, on kolo's background thread, unless they
 * return non-zero. Return values are kolo_status codes (0 = OK); kolo_last_error() gives the
 * message of the calling thread's last failure. Buffers must stay valid until the op
 * completes. No C++ exception crosses this API: a failure inside kolo is KOLO_INTERNAL. */
#ifndef KOLO_C_API_H_
#define KOLO_C_API_H_

#include <stddef.h>
#include <stdint.h>

#include "kolo/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The values of kolo::StatusCode. */
enum kolo_status {
  KOLO_OK = 0,
  KOLO_INVALID_ARGUMENT = 1,
  KOLO_FAILED_PRECONDITION = 2,
  KOLO_MISMATCH = 3,
  KOLO_ABORTED = 4,
  KOLO_DEADLINE_EXCEEDED = 5,
  KOLO_UNAVAILABLE = 6,
  KOLO_INTERNAL = 7,
  KOLO_SHUTDOWN = 8
};

/* The values of kolo::DataType and kolo::ReduceOp. */
enum kolo_dtype {
  KOLO_UINT8 = 0,
  KOLO_INT8 = 1,
  KOLO_INT32 = 2,
  KOLO_INT64 = 3,
  KOLO_FLOAT16 = 4,
  KOLO_BFLOAT16 = 5,
  KOLO_FLOAT32 = 6,
  KOLO_FLOAT64 = 7,
  KOLO_UINT16 = 8,
  KOLO_INT16 = 9,
  KOLO_BOOL = 10 /* one byte per element, 0 or 1; sum/max: or, min/product: and; no average */
};
enum kolo_reduce_op {
  KOLO_SUM = 0,
  KOLO_AVERAGE = 1,
  KOLO_MIN = 2,
  KOLO_MAX = 3,
  KOLO_PRODUCT = 4
};

/* Completion of an async op: its status code, its message ("" when OK; valid only during
 * the call) and the caller's pointer. */
typedef void (*kolo_done_fn)(int status, const char* message, void* user);

/* The message of this thread's last non-zero return ("" if none). Valid until this thread's
 * next kolo call. */
const char* kolo_last_error(void);

/* "OK", "INVALID_ARGUMENT", ... for a kolo_status code; "UNKNOWN" for another value. */
const char* kolo_status_name(int status);

/* The library's version, "major.minor.patch" (KOLO_VERSION_STRING is the header's). */
const char* kolo_version(void);

/* init() from the environment (KOLO_RANK, KOLO_SIZE, ...); blocks until every rank joined.
 * Fails with KOLO_FAILED_PRECONDITION when `header_version` (a KOLO_VERSION_NUMBER) has another
 * major.minor version than the library. kolo_init() passes this header's version; bindings
 * that load the library at run time call kolo_init_for_version() with the version they were
 * written against. */
int kolo_init_for_version(int header_version);
static inline int kolo_init(void) {
  return kolo_init_for_version(KOLO_VERSION_NUMBER);
}
int kolo_shutdown(void);
int kolo_rank(void); /* -1 when not initialized */
int kolo_size(void);
int kolo_local_rank(void);
int kolo_local_size(void);

/* A contiguous host tensor of `count` elements, reduced in place when input == output. */
int kolo_allreduce(const char* name, const void* input, void* output, int64_t count, int dtype,
                   int reduce_op);
int kolo_allreduce_async(const char* name, const void* input, void* output, int64_t count,
                         int dtype, int reduce_op, kolo_done_fn done, void* user);
/* Provides the output of allgather/alltoall once its shape is known (kolo's thread); NULL
 * fails that op on this rank only. */
typedef void* (*kolo_alloc_fn)(const int64_t* shape, int ndim, void* user);

int kolo_broadcast(const char* name, void* data, int64_t count, int dtype, int root);
int kolo_broadcast_async(const char* name, void* data, int64_t count, int dtype, int root,
                         kolo_done_fn done, void* user);
/* Out of place: the root's `input` lands in `output` on every rank (only the root's input is
 * read; every rank passes both). input == output is kolo_broadcast. */
int kolo_broadcast_out_of_place(const char* name, const void* input, void* output, int64_t count,
                                int dtype, int root);
int kolo_broadcast_out_of_place_async(const char* name, const void* input, void* output,
                                      int64_t count, int dtype, int root, kolo_done_fn done,
                                      void* user);
int kolo_barrier(void);
int kolo_barrier_async(kolo_done_fn done, void* user);

/* Point-to-point (kolo/p2p.h): `count` elements of `dtype` to / from rank `peer` of the thread's
 * current process set under `tag`, matched by the pair alone (FIFO per pair and tag).
 * timeout_seconds <= 0: KOLO_TIMEOUT_SECONDS. A receive's `source` (may be NULL; must outlive an
 * async op) is set to the sender's rank; src KOLO_ANY_SOURCE takes the first send of any rank. */
#define KOLO_ANY_SOURCE (-1)
int kolo_send(const void* data, int64_t count, int dtype, int dst, int64_t tag,
              double timeout_seconds);
int kolo_send_async(const void* data, int64_t count, int dtype, int dst, int64_t tag,
                    double timeout_seconds, kolo_done_fn done, void* user);
int kolo_recv(void* data, int64_t count, int dtype, int src, int64_t tag, double timeout_seconds,
              int* source);
int kolo_recv_async(void* data, int64_t count, int dtype, int src, int64_t tag,
                    double timeout_seconds, int* source, kolo_done_fn done, void* user);

/* `input` has shape[0..ndim) (ndim >= 1); dimension 0 may differ per rank. */
int kolo_allgather(const char* name, const void* input, const int64_t* shape, int ndim, int dtype,
                   kolo_alloc_fn alloc, void* alloc_user);
int kolo_allgather_async(const char* name, const void* input, const int64_t* shape, int ndim,
                         int dtype, kolo_alloc_fn alloc, void* alloc_user, kolo_done_fn done,
                         void* user);

/* `splits`: kolo_size() rows of dimension 0 for each rank, or NULL for an even split.
 * `received_splits` (kolo_size() entries, or NULL) gets the rows received from each rank. */
int kolo_alltoall(const char* name, const void* input, const int64_t* shape, int ndim, int dtype,
                  const int64_t* splits, kolo_alloc_fn alloc, void* alloc_user,
                  int64_t* received_splits);

/* `input` is `rows` rows of `row_elements`; `output` receives this rank's rows (rows / size,
 * the first rows % size ranks one more). */
int kolo_reducescatter(const char* name, const void* input, int64_t rows, int64_t row_elements,
                       void* output, int dtype, int reduce_op);

/* `count` tensors of one dtype, always one fused transfer. */
int kolo_grouped_allreduce(int count, const char* const* names, const void* const* inputs,
                           void* const* outputs, const int64_t* element_counts, int dtype,
                           int reduce_op);

/* `count` allgathers, always one fused transfer: member i has shape shapes[i][0..ndims[i])
 * and dtype dtypes[i]; `alloc` provides each member's output, called with alloc_users[i]
 * (alloc_users may be NULL: every call gets NULL). */
int kolo_grouped_allgather(int count, const char* const* names, const void* const* inputs,
                           const int64_t* const* shapes, const int* ndims, const int* dtypes,
                           kolo_alloc_fn alloc, void* const* alloc_users);

/* `count` reducescatters, always one fused transfer: member i is rows[i] rows of
 * row_elements[i] of dtype dtypes[i]; outputs[i] receives this rank's rows of it. */
int kolo_grouped_reducescatter(int count, const char* const* names, const void* const* inputs,
                               const int64_t* rows, const int64_t* row_elements,
                               void* const* outputs, const int* dtypes, int reduce_op);

/* Handles, instead of a completion of your own (Horovod's poll and synchronize): pass
 * kolo_handle_done as `done` and a handle from kolo_handle_new() as `user` to any *_async
 * function; then kolo_poll() (1: completed, 0: not yet; never blocks) and
 * kolo_synchronize() (waits, at most `timeout_seconds` when >= 0, and returns the op's
 * status; KOLO_DEADLINE_EXCEEDED while it is still running; KOLO_FAILED_PRECONDITION from a
 * completion). kolo_handle_free() may be called at any time, also before the op completed or
 * when its enqueue failed; nothing stays behind. One handle serves one op. Thread-safe. */
typedef struct kolo_handle kolo_handle;
kolo_handle* kolo_handle_new(void); /* NULL when out of memory */
void kolo_handle_done(int status, const char* message, void* handle);
int kolo_poll(const kolo_handle* handle);
int kolo_synchronize(kolo_handle* handle, double timeout_seconds);
void kolo_handle_free(kolo_handle* handle);

/* Horovod's start_timeline(path, mark_cycles): this rank writes `path` with ".rank<r>" before
 * the extension; `mark_cycles` (0 or 1) adds a CYCLE instant per planned batch. Starting it
 * again with the same path is OK; another path fails until kolo_stop_timeline(). */
int kolo_start_timeline(const char* path, int mark_cycles);
int kolo_stop_timeline(void);

/* Keeps taking part (contributing zeros) until every rank has joined; `last_rank` (or NULL)
 * gets the last rank to join. */
int kolo_join(int* last_rank);
int kolo_join_async(int* last_rank, kolo_done_fn done, void* user);

/* Process sets (kolo/kolo.h, ProcessSetScope). kolo_add_process_set is collective over every
 * rank (each passes the same `count` ranks) and sets *id to the new set's id;
 * kolo_remove_process_set is collective too. kolo_set_process_set makes `id` the calling
 * thread's current set (every op it enqueues runs there; 0: the global set) and returns the
 * previous one. kolo_process_set_rank / _size: this rank's rank in the set and its size, -1
 * when not a member / unknown. */
int kolo_add_process_set(const int* ranks, int count, int* id);
int kolo_remove_process_set(int id);
int kolo_set_process_set(int id);
int kolo_process_set_rank(int id);
int kolo_process_set_size(int id);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* KOLO_C_API_H_ */
