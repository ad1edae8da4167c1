// ShmSegment: one POSIX shared-memory object (shm_open + mmap) mapped into this process, for
// the intra-host data plane (transport/shm/shm_mesh.h). Rank 0 creates it under a fresh name, the
// other ranks open it by that name, and the creator unlinks the name as soon as everyone has
// mapped it. Until then the creator holds an exclusive flock(2) on the object, which the kernel
// drops when the creator dies however it dies: a name whose lock is free has no creator left
// to unlink it, so a survivor that knows the name removes it (RemoveIfAbandoned) and the next
// job's creator sweeps any others (RemoveStaleSegments). A live creator's name is never
// removed: its lock is held (docs/RELIABILITY.md, scenario 18).
//
// Threading: not thread-safe; one owner. The mapped bytes themselves are shared between
// processes: how they are used is the caller's contract.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

  // Removes the name (the mapping stays valid) and drops the creator's lock. Idempotent; only
  // the creator unlinks.
  void Unlink();

  // Removes `name` if its creator is gone (its lock is free), waiting up to `wait` for a
  // creator that is dying (its lock is released a moment after its sockets close). True if it
  // removed the name; false if it is gone already, is held by a live creator, or is not ours.
  static bool RemoveIfAbandoned(const std::string& name, std::chrono::milliseconds wait);
  // Removes every "/kolo-<pid>-<hex>" object in /dev/shm whose creating process no longer
  // exists and whose lock is free (a creator killed before it could unlink). Returns the
  // names removed. Objects of other users, live creators and other names are left alone.
  static std::vector<std::string> RemoveStaleSegments();

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& name() const { return name_; }

 private:
  ShmSegment(std::string name, uint8_t* data, size_t size, int lock_fd);

  // Constant after construction.
  const std::string name_;
  uint8_t* const data_;
  const size_t size_;
  // Owner only.
  int lock_fd_;  // >= 0 while this (creating) segment holds the lock and must unlink the name
};

// A name no other job uses: "/kolo-<pid>-<16 random hex digits>".
std::string FreshShmName();

}  // namespace kolo::transport
