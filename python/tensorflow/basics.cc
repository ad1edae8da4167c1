// The C functions kolo.tensorflow reaches through ctypes (python/kolo/tensorflow/basics.py) for
// what is not a TensorFlow op: init, shutdown, identity, process sets and the timeline of kolo's
// default runtime. Each returns a kolo status code (0 = OK) where it can fail, with the message
// in kolo_tf_last_error() for the calling thread. ctypes releases the GIL around every call, so
// the waits (init, shutdown, adding and removing process sets, asking kolorun's elastic driver)
// do not hold Python up. The elastic calls are kolo/elastic.h's, for kolo.tensorflow.elastic.
#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/elastic.h"
#include "kolo/kolo.h"

namespace {

thread_local std::string last_error;

int Report(const kolo::Status& status) {
  last_error = status.message();
  return static_cast<int>(status.code());
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) const char* kolo_tf_last_error() {
  return last_error.c_str();
}

__attribute__((visibility("default"))) const char* kolo_tf_status_name(int code) {
  return kolo::StatusCodeName(static_cast<kolo::StatusCode>(code));
}

__attribute__((visibility("default"))) const char* kolo_tf_version() {
  return kolo::version();
}

__attribute__((visibility("default"))) int kolo_tf_init() {
  return Report(kolo::init());
}

__attribute__((visibility("default"))) int kolo_tf_shutdown() {
  return Report(kolo::shutdown());
}

__attribute__((visibility("default"))) int kolo_tf_is_initialized() {
  return kolo::is_initialized() ? 1 : 0;
}

// Each -1 when not initialized.
__attribute__((visibility("default"))) int kolo_tf_rank() {
  return kolo::rank();
}
__attribute__((visibility("default"))) int kolo_tf_size() {
  return kolo::size();
}
__attribute__((visibility("default"))) int kolo_tf_local_rank() {
  return kolo::local_rank();
}
__attribute__((visibility("default"))) int kolo_tf_local_size() {
  return kolo::local_size();
}
__attribute__((visibility("default"))) int kolo_tf_cross_rank() {
  return kolo::cross_rank();
}
__attribute__((visibility("default"))) int kolo_tf_cross_size() {
  return kolo::cross_size();
}

__attribute__((visibility("default"))) int kolo_tf_add_process_set(const int* ranks, int count,
                                                                   int* id) {
  kolo::StatusOr<int> added = kolo::add_process_set(std::vector<int>(ranks, ranks + count));
  if (!added.ok()) return Report(added.status());
  *id = *added;
  return 0;
}

__attribute__((visibility("default"))) int kolo_tf_remove_process_set(int id) {
  return Report(kolo::remove_process_set(id));
}

// -1 when not a member (rank) or the set is unknown (both).
__attribute__((visibility("default"))) int kolo_tf_process_set_rank(int id) {
  return kolo::process_set_rank(id);
}
__attribute__((visibility("default"))) int kolo_tf_process_set_size(int id) {
  return kolo::process_set_size(id);
}

// Writes up to `capacity` of the set's ranks; returns how many it has (0 for an unknown set).
__attribute__((visibility("default"))) int kolo_tf_process_set_ranks(int id, int* ranks,
                                                                     int capacity) {
  std::vector<int> all = kolo::process_set_ranks(id);
  std::copy_n(all.begin(), std::min<size_t>(all.size(), std::max(capacity, 0)), ranks);
  return static_cast<int>(all.size());
}

__attribute__((visibility("default"))) int kolo_tf_start_timeline(const char* path,
                                                                  int mark_cycles) {
  return Report(kolo::start_timeline(path, mark_cycles != 0));
}

__attribute__((visibility("default"))) int kolo_tf_stop_timeline() {
  return Report(kolo::stop_timeline());
}

// Whether this process belongs to an elastic job (kolo::elastic::enabled).
__attribute__((visibility("default"))) int kolo_tf_elastic_enabled() {
  return kolo::elastic::enabled() ? 1 : 0;
}

// What changed in the job's hosts after `since` (kolo::elastic::poll_host_updates): the driver's
// timestamp and the HostUpdateBits, written only when the call succeeds.
__attribute__((visibility("default"))) int kolo_tf_elastic_poll(int64_t since, int64_t* timestamp,
                                                                int* kinds) {
  kolo::StatusOr<kolo::elastic::HostUpdates> updates = kolo::elastic::poll_host_updates(since);
  if (!updates.ok()) return Report(updates.status());
  *timestamp = updates->timestamp;
  *kinds = updates->kinds;
  return 0;
}

// The generation of the membership this process last joined; 0 before its first init().
__attribute__((visibility("default"))) int64_t kolo_tf_elastic_generation() {
  return kolo::elastic::generation();
}

}  // extern "C"
