// BusyLoad: N busy processes beside a benchmark's ranks, for the runs of docs/PERFORMANCE.md
// "On a busy machine" (kolo-bench --busy N). Each is a forked child that spins in user space,
// unbound (its CPU affinity reset to every CPU the machine has online, whatever the rank's
// binding), at the parent's nice level: what `yes >/dev/null` is to the peers' runs
// (tools/bench/busy.sh). The children die with the object, or with the parent process
// (PR_SET_PDEATHSIG) if it is killed first.
//
// Threading: one owner thread; Start before the run, destroy after it.
#pragma once

#include <sys/types.h>

#include <memory>
#include <vector>

#include "kolo/status.h"

namespace kolo::bench {

class BusyLoad {
 public:
  // Starts `count` busy processes (0: none). Fails naming fork()'s error; the ones already
  // started are stopped then.
  static StatusOr<std::unique_ptr<BusyLoad>> Start(int count);
  ~BusyLoad();  // kills and reaps every child

  BusyLoad(const BusyLoad&) = delete;
  BusyLoad& operator=(const BusyLoad&) = delete;

  const std::vector<pid_t>& pids() const { return pids_; }

 private:
  BusyLoad() = default;
  std::vector<pid_t> pids_;
};

}  // namespace kolo::bench
