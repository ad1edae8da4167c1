/* The C API from a C program: allreduce (blocking and async), broadcast, barrier, an
 * argument error, shutdown. Run alone (one rank) and under kolorun (several); exits non-zero
 * with a message on the first thing that is wrong. */
#include <kolo/kolo_c.h>
#include <stdio.h>

static void on_done(int status, const char* message, void* user) {
  (void)message;
  *(int*)user = 100 + status; /* 100: completed with KOLO_OK */
}

static int fail(const char* what) {
  fprintf(stderr, "c_api_test rank %d: %s (%s)\n", kolo_rank(), what, kolo_last_error());
  return 1;
}

int main(void) {
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

  if (kolo_broadcast("c/bad", b, 3, KOLO_FLOAT64, size) != KOLO_INVALID_ARGUMENT) {
    return fail("a root outside the job was accepted");
  }
  if (kolo_last_error()[0] == '\0') return fail("no message for the bad root");
  if (kolo_shutdown() != KOLO_OK) return fail("kolo_shutdown");
  printf("c api ok on rank %d of %d\n", rank, size);
  return 0;
}
