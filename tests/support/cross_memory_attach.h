// Cross-memory attach in tests of shared-memory single copy: whether this process may use it at
// all (a container's seccomp profile may refuse it: the tests that need it then run the
// fallback alone and say so), and DenyCrossMemoryAttach, which makes process_vm_readv and
// process_vm_writev fail with EPERM on the calling thread (and threads it starts afterwards)
// through a real seccomp filter, as such a profile would, for the tests of the refusal. A filter
// cannot be removed: call it on a thread that ends with the test (a rank's thread).
#pragma once

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>

namespace kolo::testing {

// Whether this process may read its own memory through process_vm_readv.
inline bool CrossMemoryAttachWorks() {
  int source = 42, copy = 0;
  iovec local{&copy, sizeof(copy)}, remote{&source, sizeof(source)};
  return process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == sizeof(copy) && copy == 42;
}

// True if the filter is in place.
inline bool DenyCrossMemoryAttach() {
#if defined(__x86_64__)
  constexpr unsigned kArch = AUDIT_ARCH_X86_64;
#elif defined(__aarch64__)
  constexpr unsigned kArch = AUDIT_ARCH_AARCH64;
#else
  return false;
#endif
  sock_filter filter[] = {
      // Another architecture's system call numbers mean other calls: let them through.
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, arch)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, kArch, 0, 3),
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_readv, 2, 0),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_process_vm_writev, 1, 0),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
  };
  sock_fprog program{static_cast<unsigned short>(sizeof(filter) / sizeof(filter[0])), filter};
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) return false;
  return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) == 0;
}

}  // namespace kolo::testing
