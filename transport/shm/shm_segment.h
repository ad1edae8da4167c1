// ShmSegment: one POSIX shared-memory object (shm_open + mmap) mapped into this process, for
// the intra-host data plane (transport/shm/shm_mesh.h). Rank 0 creates it under a fresh name, the
// other ranks open it by that name, and the creator unlinks the name as soon as everyone has
// mapped it, so nothing is left in /dev/shm once the processes are gone, crashed or not.
//
// Threading: not thread-safe; one owner. The mapped bytes themselves are shared between
// processes: how they are used is the caller's contract.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "kolo/status.h"

namespace kolo::transport {

class ShmSegment {
 public:
  // Creates a new object called `name` ("/kolo-..."; it must not exist), sized `bytes`
  // (zero-filled, with its memory reserved up front so a full /dev/shm fails here rather than
  // with SIGBUS later), and maps it with every page faulted in. The name stays linked until
  // Unlink() or destruction of the creator's segment.
  static StatusOr<std::unique_ptr<ShmSegment>> Create(const std::string& name, size_t bytes);
  // Maps the existing object `name`, which must be exactly `bytes` long.
  static StatusOr<std::unique_ptr<ShmSegment>> Open(const std::string& name, size_t bytes);
  ~ShmSegment();  // unmaps; the creator also unlinks if it has not yet
  ShmSegment(const ShmSegment&) = delete;
  ShmSegment& operator=(const ShmSegment&) = delete;

  // Removes the name (the mapping stays valid). Idempotent; only the creator unlinks.
  void Unlink();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  ShmSegment(std::string name, uint8_t* data, size_t size, bool owns_name);

  // Constant after construction.
  const std::string name_;
  uint8_t* const data_;
  const size_t size_;
  // Owner only.
  bool owns_name_;  // true while this (creating) segment must still unlink the name
};

// A name no other job uses: "/kolo-<pid>-<16 random hex digits>".
std::string FreshShmName();

}  // namespace kolo::transport
