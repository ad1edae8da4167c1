/* Every rank through the installed C API, built with pkg-config as strict C99: init (which
 * checks the header version), an async allreduce of a few floats with a callback and a user
 * pointer, a barrier that orders it, kolo_version, shutdown. Prints one line per rank that
 * install_test.sh checks; exits non-zero with a message on any failure. */
#include <kolo/c_api.h>
#include <stdio.h>

struct completion {
  int calls;
  int status;
};

static void on_done(int status, const char* message, void* user) {
  struct completion* done = (struct completion*)user;
  (void)message;
  done->calls += 1;
  done->status = status;
}

static int fail(const char* what, int status) {
  fprintf(stderr, "consumer_c: %s: %s: %s\n", what, kolo_status_name(status), kolo_last_error());
  return 1;
}

int main(void) {
  struct completion done = {0, -1};
  float values[4] = {1.0f, 2.0f, 3.0f, 4.0f};
  int status = kolo_init();
  if (status != KOLO_OK) return fail("kolo_init", status);
  status = kolo_allreduce_async("consumer/values", values, values, 4, KOLO_FLOAT32, KOLO_SUM,
                                on_done, &done);
  if (status != KOLO_OK) return fail("kolo_allreduce_async", status);
  /* Ops complete in order on every rank: the allreduce's callback has run once this returns. */
  status = kolo_barrier();
  if (status != KOLO_OK) return fail("kolo_barrier", status);
  if (done.calls != 1 || done.status != KOLO_OK) return fail("the callback", done.status);
  printf("c consumer: library %s headers %s rank %d of %d values %g %g %g %g\n", kolo_version(),
         KOLO_VERSION_STRING, kolo_rank(), kolo_size(), values[0], values[1], values[2], values[3]);
  status = kolo_shutdown();
  if (status != KOLO_OK) return fail("kolo_shutdown", status);
  return 0;
}
