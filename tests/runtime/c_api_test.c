/* The C API from a C program (built as C99 with -pedantic -Werror): the version check of init,
 * allreduce (blocking and async; int16 and bool too), broadcast (in and out of place), barrier,
 * allgather, alltoall, reducescatter, grouped allreduce, allgather and reducescatter, handles,
 * the timeline,
 * point-to-point, join, argument errors, shutdown. Run alone (one rank) and under kolorun
 * (several); exits non-zero with a message on the first thing that is wrong. */
#define _POSIX_C_SOURCE 200809L /* getpid */
#include <kolo/c_api.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void on_done(int status, const char* message, void* user) {
  (void)message;
  *(int*)user = 100 + status; /* 100: completed with KOLO_OK */
}

/* Allocator backed by a static buffer big enough for these tests. */
static double g_out[4096];
static int64_t g_out_rows = -1;
static void* into_g_out(const int64_t* shape, int ndim, void* user) {
  (void)ndim;
  (void)user;
  g_out_rows = shape[0];
  return g_out;
}

static int fail(const char* what) {
  fprintf(stderr, "c_api_test rank %d: %s (%s)\n", kolo_rank(), what, kolo_last_error());
  return 1;
}

/* A program compiled against another minor version is refused, with both versions named. */
static int check_versions(void) {
  char library[64];
  if (strcmp(kolo_version(), KOLO_VERSION_STRING) != 0) return fail("library version");
  if (kolo_init_for_version(KOLO_VERSION_NUMBER + 100) != KOLO_FAILED_PRECONDITION) {
    return fail("a newer minor version of the headers was accepted");
  }
  snprintf(library, sizeof library, "library of kolo %s", KOLO_VERSION_STRING);
  if (strstr(kolo_last_error(), library) == NULL) return fail("the message names no library");
  if (strcmp(kolo_status_name(KOLO_FAILED_PRECONDITION), "FAILED_PRECONDITION") != 0 ||
      strcmp(kolo_status_name(99), "UNKNOWN") != 0) {
    return fail("kolo_status_name");
  }
  return 0;
}

/* int16 sums; bool: max is or, min is and, average is refused. */
static int check_new_dtypes(int rank, int size) {
  int16_t h[2];
  uint8_t flags[2], any[2], all[2];
  h[0] = (int16_t)(-rank - 1);
  h[1] = 300;
  if (kolo_allreduce("c/int16", h, h, 2, KOLO_INT16, KOLO_SUM) != KOLO_OK) return fail("int16");
  if (h[0] != -size * (size + 1) / 2 || h[1] != 300 * size) return fail("int16 data");
  flags[0] = (uint8_t)(rank == 0);
  flags[1] = 1;
  if (kolo_allreduce("c/any", flags, any, 2, KOLO_BOOL, KOLO_MAX) != KOLO_OK) return fail("or");
  if (kolo_allreduce("c/all", flags, all, 2, KOLO_BOOL, KOLO_MIN) != KOLO_OK) return fail("and");
  if (any[0] != 1 || any[1] != 1 || all[0] != (size == 1) || all[1] != 1) {
    return fail("bool data");
  }
  if (kolo_allreduce("c/avg", flags, flags, 2, KOLO_BOOL, KOLO_AVERAGE) != KOLO_INVALID_ARGUMENT) {
    return fail("a bool average was accepted");
  }
  if (strstr(kolo_last_error(), "no average") == NULL) return fail("the message");
  return 0;
}

/* The last rank's bytes land in every rank's output; every input stays. */
static int check_out_of_place_broadcast(int rank, int size) {
  uint8_t in[2], out[2] = {99, 99};
  int done = 0;
  in[0] = (uint8_t)rank;
  in[1] = (uint8_t)(rank + 1);
  if (kolo_broadcast_out_of_place("c/oop", in, out, 2, KOLO_UINT8, size - 1) != KOLO_OK) {
    return fail("out-of-place broadcast");
  }
  if (out[0] != size - 1 || out[1] != size || in[0] != rank) return fail("broadcast data");
  out[0] = out[1] = 99;
  if (kolo_broadcast_out_of_place_async("c/oop2", in, out, 2, KOLO_UINT8, 0, on_done, &done) !=
      KOLO_OK) {
    return fail("async out-of-place broadcast");
  }
  if (kolo_barrier() != KOLO_OK) return fail("barrier");
  if (done != 100 || out[0] != 0 || out[1] != 1) return fail("async broadcast data");
  return 0;
}

/* Horovod's start_timeline(path, mark_cycles); the same path twice is fine. */
/* A member's output of the grouped allgather: `user` is its buffer of 20 elements. */
static void* into_user(const int64_t* shape, int ndim, void* user) {
  return ndim == 2 && shape[0] <= 10 ? user : NULL;
}

/* A grouped allgather of two tensors of rank + 1 rows of 2, and a grouped reducescatter of two
 * int32 tensors of 5 and 3 rows of 1 (rank 0 receives row 0 of each, whatever the size <= 4). */
static int check_grouped_gather_scatter(int rank, int size) {
  float a[8], a_out[20];
  double b[8], b_out[20];
  int32_t x[5] = {1, 2, 3, 4, 5}, y[3] = {10, 20, 30}, x_part[5], y_part[3];
  const char* names[2] = {"c/ga", "c/gb"};
  const void* inputs[2];
  int64_t shape[2];
  const int64_t* shapes[2];
  const int ndims[2] = {2, 2};
  const int dtypes[2] = {KOLO_FLOAT32, KOLO_FLOAT64}; /* a mixed group: a transfer each */
  void* users[2];
  const char* scatter_names[2] = {"c/sx", "c/sy"};
  const void* scatter_inputs[2];
  void* parts[2];
  const int64_t rows[2] = {5, 3}, row_elements[2] = {1, 1};
  const int int_dtypes[2] = {KOLO_INT32, KOLO_INT32};
  int i, r, k;
  inputs[0] = a;
  inputs[1] = b;
  shape[0] = rank + 1;
  shape[1] = 2;
  shapes[0] = shape;
  shapes[1] = shape;
  users[0] = a_out;
  users[1] = b_out;
  scatter_inputs[0] = x;
  scatter_inputs[1] = y;
  parts[0] = x_part;
  parts[1] = y_part;
  for (i = 0; i < 2 * (rank + 1); ++i) {
    a[i] = (float)(rank * 10 + i);
    b[i] = (double)(100 + rank * 10 + i);
  }
  if (kolo_grouped_allgather(2, names, inputs, shapes, ndims, dtypes, into_user, users) !=
      KOLO_OK) {
    return fail("grouped allgather");
  }
  k = 0;
  for (r = 0; r < size; ++r) {
    for (i = 0; i < 2 * (r + 1); ++i, ++k) {
      if (a_out[k] != (float)(r * 10 + i) || b_out[k] != (double)(100 + r * 10 + i)) {
        return fail("grouped allgather data");
      }
    }
  }
  if (kolo_grouped_reducescatter(2, scatter_names, scatter_inputs, rows, row_elements, parts,
                                 int_dtypes, KOLO_SUM) != KOLO_OK) {
    return fail("grouped reducescatter");
  }
  if (rank == 0 && (x_part[0] != size || y_part[0] != 10 * size)) {
    return fail("grouped reducescatter data");
  }
  return 0;
}

/* Handles: an allreduce waited with kolo_synchronize, one polled until done, one freed before
 * it completes, and one whose enqueue fails (its handle freed, nothing left behind). */
static int check_handles(int size) {
  int32_t x[3] = {1, 2, 3}, y[2] = {5, 5}, z[1] = {1};
  kolo_handle* waited = kolo_handle_new();
  kolo_handle* polled = kolo_handle_new();
  kolo_handle* dropped = kolo_handle_new();
  kolo_handle* refused = kolo_handle_new();
  int spins = 0;
  if (!waited || !polled || !dropped || !refused) return fail("kolo_handle_new");
  if (kolo_allreduce_async("c/hx", x, x, 3, KOLO_INT32, KOLO_SUM, kolo_handle_done, waited) !=
          KOLO_OK ||
      kolo_allreduce_async("c/hy", y, y, 2, KOLO_INT32, KOLO_SUM, kolo_handle_done, polled) !=
          KOLO_OK ||
      kolo_allreduce_async("c/hz", z, z, 1, KOLO_INT32, KOLO_SUM, kolo_handle_done, dropped) !=
          KOLO_OK) {
    return fail("allreduce with a handle");
  }
  kolo_handle_free(dropped);
  if (kolo_allreduce_async("c/hbad", x, x, -1, KOLO_INT32, KOLO_SUM, kolo_handle_done, refused) ==
      KOLO_OK) {
    return fail("an allreduce of -1 elements was queued");
  }
  kolo_handle_free(refused);
  if (kolo_synchronize(waited, -1) != KOLO_OK || x[2] != 3 * size) return fail("synchronize");
  if (kolo_poll(waited) != 1) return fail("poll after synchronize");
  while (kolo_poll(polled) == 0) {
    if (++spins > 100000000) return fail("poll never completed");
  }
  if (kolo_synchronize(polled, 0) != KOLO_OK || y[1] != 5 * size) return fail("polled data");
  kolo_handle_free(waited);
  kolo_handle_free(polled);
  return kolo_barrier() == KOLO_OK ? 0 : fail("barrier after handles");
}

static int check_timeline(void) {
  char path[64], file[80];
  snprintf(path, sizeof path, "/tmp/kolo_c_api_%ld.json", (long)getpid());
  if (kolo_start_timeline(path, 1) != KOLO_OK) return fail("start_timeline");
  if (kolo_start_timeline(path, 1) != KOLO_OK) return fail("start_timeline again");
  if (kolo_barrier() != KOLO_OK) return fail("barrier");
  if (kolo_stop_timeline() != KOLO_OK) return fail("stop_timeline");
  snprintf(file, sizeof file, "/tmp/kolo_c_api_%ld.rank%d.json", (long)getpid(), kolo_rank());
  if (remove(file) != 0) return fail("no timeline file");
  return 0;
}

/* Process sets: the ranks but the last form a set; its members allreduce among themselves. */
static int check_process_sets(int rank, int size) {
  int ranks[64];
  int members = size > 1 ? size - 1 : 1;
  for (int r = 0; r < members; ++r) ranks[r] = r;
  int id = -1;
  if (kolo_add_process_set(ranks, members, &id) != KOLO_OK || id < 1) return fail("add set");
  if (kolo_process_set_size(id) != members) return fail("set size");
  const int member = rank < members;
  if (kolo_process_set_rank(id) != (member ? rank : -1)) return fail("set rank");
  int previous = kolo_set_process_set(id);
  if (previous != 0) return fail("previous set");
  float x[3] = {1, 1, 1};
  int status = kolo_allreduce("c/in_set", x, x, 3, KOLO_FLOAT32, KOLO_SUM);
  kolo_set_process_set(previous);
  if (member && (status != KOLO_OK || x[2] != (float)members)) return fail("set allreduce");
  if (!member && status != KOLO_INVALID_ARGUMENT) return fail("an outsider submitted to a set");
  if (kolo_remove_process_set(id) != KOLO_OK) return fail("remove set");
  if (kolo_process_set_size(id) != -1) return fail("removed set still known");
  return 0;
}

/* Point-to-point: a ring exchange (blocking send to the next rank after an async receive from
 * the previous one), a receive from any rank, and a peer outside the job. One rank: the bad peer
 * only. */
static int check_p2p(int rank, int size) {
  int32_t mine[3] = {rank, rank + 1, rank + 2};
  int32_t got[3] = {-1, -1, -1};
  int source = -5;
  int done = 0;
  if (kolo_send(mine, 3, KOLO_INT32, size, 0, 0) != KOLO_INVALID_ARGUMENT) {
    return fail("a send to a rank outside the job was accepted");
  }
  if (strstr(kolo_last_error(), "is not a rank of this job") == NULL) return fail("bad peer text");
  if (size < 2) return 0;
  const int next = (rank + 1) % size;
  const int prev = (rank + size - 1) % size;
  if (kolo_recv_async(got, 3, KOLO_INT32, prev, 7, 0, &source, on_done, &done) != KOLO_OK) {
    return fail("kolo_recv_async");
  }
  if (kolo_send(mine, 3, KOLO_INT32, next, 7, 10.0) != KOLO_OK) return fail("kolo_send");
  const struct timespec ms = {0, 1000000};
  for (int i = 0; i < 20000 && *(volatile int*)&done == 0; ++i) nanosleep(&ms, NULL);
  if (done != 100 || source != prev || got[0] != prev || got[2] != prev + 2) {
    return fail("ring exchange");
  }
  /* Every rank sends rank 0 its rank; rank 0 takes them from any rank. */
  if (rank != 0) {
    return kolo_send(&rank, 1, KOLO_INT32, 0, 8, 0) == KOLO_OK ? 0 : fail("send to rank 0");
  }
  int seen = 0;
  for (int i = 1; i < size; ++i) {
    int32_t value = -1;
    if (kolo_recv(&value, 1, KOLO_INT32, KOLO_ANY_SOURCE, 8, 0, &source) != KOLO_OK ||
        value != source) {
      return fail("recv from any rank");
    }
    seen |= 1 << source;
  }
  return seen == ((1 << size) - 2) ? 0 : fail("senders seen");
}

int main(void) {
  if (check_versions() != 0) return 1;
  if (kolo_init() != KOLO_OK) return fail("kolo_init");
  const int rank = kolo_rank();
  const int size = kolo_size();
  float x[5];
  for (int i = 0; i < 5; ++i) x[i] = (float)(rank + 1);
  if (kolo_allreduce("c/sum", x, x, 5, KOLO_FLOAT32, KOLO_SUM) != KOLO_OK) return fail("sum");
  for (int i = 0; i < 5; ++i) {
    if (x[i] != (float)(size * (size + 1) / 2)) return fail("wrong sum");
  }
  double b[3] = {rank, rank, rank};
  if (kolo_broadcast("c/bcast", b, 3, KOLO_FLOAT64, size - 1) != KOLO_OK) return fail("bcast");
  if (b[0] != size - 1 || b[2] != size - 1) return fail("wrong broadcast");

  int done = 0;
  int64_t y[2] = {rank, 1};
  if (kolo_allreduce_async("c/async", y, y, 2, KOLO_INT64, KOLO_MAX, on_done, &done) != KOLO_OK) {
    return fail("async");
  }
  /* Responses run in order: the allreduce's callback has run once the later barrier returns. */
  if (kolo_barrier() != KOLO_OK) return fail("barrier");
  if (done != 100 || y[0] != size - 1 || y[1] != 1) return fail("async result");

  /* allgather: rank r contributes r + 1 rows of 2 values, all equal to r. */
  double rows_in[64];
  const int64_t gather_shape[2] = {rank + 1, 2};
  for (int i = 0; i < 2 * (rank + 1); ++i) rows_in[i] = rank;
  if (kolo_allgather("c/gather", rows_in, gather_shape, 2, KOLO_FLOAT64, into_g_out, NULL) !=
      KOLO_OK) {
    return fail("allgather");
  }
  if (g_out_rows != size * (size + 1) / 2) return fail("allgather rows");
  for (int r = 0, at = 0; r < size; ++r) {
    for (int i = 0; i < 2 * (r + 1); ++i, ++at) {
      if (g_out[at] != r) return fail("allgather data");
    }
  }

  /* alltoall, even split: one row of 1 value for each rank, holding 10 * sender + receiver. */
  double to_all[64];
  int64_t received[64];
  const int64_t a2a_shape[2] = {size, 1};
  for (int d = 0; d < size; ++d) to_all[d] = 10 * rank + d;
  if (kolo_alltoall("c/a2a", to_all, a2a_shape, 2, KOLO_FLOAT64, NULL, into_g_out, NULL,
                    received) != KOLO_OK) {
    return fail("alltoall");
  }
  for (int s = 0; s < size; ++s) {
    if (received[s] != 1 || g_out[s] != 10 * s + rank) return fail("alltoall data");
  }

  /* reducescatter of size * 2 rows of 1: rank r gets rows 2r and 2r + 1, each sum = size. */
  float rs_in[128], rs_out[2];
  for (int i = 0; i < 2 * size; ++i) rs_in[i] = 1.0f;
  if (kolo_reducescatter("c/rs", rs_in, 2 * size, 1, rs_out, KOLO_FLOAT32, KOLO_SUM) != KOLO_OK) {
    return fail("reducescatter");
  }
  if (rs_out[0] != (float)size || rs_out[1] != (float)size) return fail("reducescatter data");

  /* grouped allreduce of two tensors. */
  int32_t g1[3] = {1, 1, 1}, g2[2] = {2, 2};
  const char* names[2] = {"c/g1", "c/g2"};
  const void* inputs[2] = {g1, g2};
  void* outputs[2] = {g1, g2};
  const int64_t counts[2] = {3, 2};
  if (kolo_grouped_allreduce(2, names, inputs, outputs, counts, KOLO_INT32, KOLO_SUM) != KOLO_OK) {
    return fail("grouped allreduce");
  }
  if (g1[2] != size || g2[1] != 2 * size) return fail("grouped allreduce data");

  if (check_new_dtypes(rank, size) != 0) return 1;
  if (check_grouped_gather_scatter(rank, size) != 0) return 1;
  if (check_handles(size) != 0) return 1;
  if (check_out_of_place_broadcast(rank, size) != 0) return 1;
  if (check_timeline() != 0) return 1;
  if (check_process_sets(rank, size) != 0) return 1;
  if (check_p2p(rank, size) != 0) return 1;

  if (kolo_broadcast("c/bad", b, 3, KOLO_FLOAT64, size) != KOLO_INVALID_ARGUMENT) {
    return fail("a root outside the job was accepted");
  }
  if (kolo_last_error()[0] == '\0') return fail("no message for the bad root");
  int last = -2;
  if (kolo_join(&last) != KOLO_OK || last < 0 || last >= size) return fail("join");
  if (kolo_shutdown() != KOLO_OK) return fail("kolo_shutdown");
  printf("c api ok on rank %d of %d\n", rank, size);
  return 0;
}
