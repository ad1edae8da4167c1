// WaitingOps: this rank's side of the fast path (docs/FAST-PATH.md): its cached ops waiting for
// a round (the ids its round messages report ready), the joins and process-set removals held
// behind them, and the ids it diverts to the controller instead, and why (an op that waited past
// its patience, metadata that changed, this rank's join of their set). Part of FastPath, which
// asks it what a new op does and what its next round message reports, and hands it what the
// rounds decided and each controller response as it goes to run. What an id stands for it reads
// from the OpCache.
//
// Threading: not thread-safe; FastPath's (the loop thread). TensorEntry pointers it holds
// belong to the tensor queue; Drop() forgets them.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <vector>

#include "core/clock.h"
#include "core/loop/op_cache.h"
#include "core/messages.h"
#include "core/round_lane.h"
#include "core/tensor_entry.h"

namespace kolo {

class WaitingOps {
 public:
  using TimePoint = Clock::TimePoint;

  // `cache` must outlive it. `patience`: how long a cached op waits for the other ranks before
  // it goes to the controller.
  WaitingOps(const OpCache* cache, Clock::TimePoint::duration patience);

  // --- This rank's new ops. ---
  // `entry` (a cached request with `cache_id`) waits for a round when it can: a CPU op outside a
  // group whose id this rank may take the fast path with and has not diverted, of a set this
  // rank's join is not in flight in (and, but for an allreduce, while this rank has not joined
  // the job: the controller names that error). False: it goes to the controller.
  bool Wait(TensorEntry* entry, uint32_t cache_id, TimePoint now);
  // A group's members (`entries`, in the group's order, with their requests' `cache_ids`) wait
  // for a round all together or not at all: each as Wait would take it, with the group this
  // rank's cached spec knows. Not all: every member's old id is diverted (DivertChanged), so the
  // peers' copies meet the whole group at the controller.
  bool WaitGroup(const std::vector<TensorEntry*>& entries, const std::vector<uint32_t>& cache_ids,
                 TimePoint now);
  // A tensor named `name` goes to the controller with new metadata: the peers' cached copies of
  // its old id must meet it there (the controller names the mismatch).
  void DivertChanged(const std::string& name);
  // This rank's join of `process_set` (0: the job) is in flight: the set's ids go to the
  // controller on every member (which runs them with this rank's zeros), so this rank diverts
  // every id of the set it is not waiting on itself, and each again after its instance ran,
  // until the join's response.
  void Join(int process_set);
  // A join or a set's removal that must follow this rank's waiting cached ops (all of them for
  // a join, the set's for a removal), as it would on the controller's stream: true if it is
  // held (TakeReleased hands it back once they have been decided).
  bool Hold(TensorEntry* held);
  // The next held join or removal that may go to the controller now, or null; in the order
  // they were held.
  TensorEntry* TakeReleased();

  // --- What this rank's round messages report. ---
  // Fills `message`'s ready ids (this rank's, then the other sets' ids, ascending), the ids
  // diverted since the last message, and `joined`.
  void Report(RoundMessage* message);
  // Something the last message did not report: a new waiting op, a new diversion, another
  // set's new id.
  bool HasNews() const;
  bool joined() const { return joined_; }

  // --- What leaves. ---
  // Diverts what waited past the patience (everything with `everything`: this rank or a peer
  // is stopping), and what a held removal of its set waits behind: the ids go to
  // `to_controller`.
  void DivertOverdue(TimePoint now, bool everything, std::vector<uint32_t>* to_controller);
  // `id` goes to the controller (a round decided so); if it waits here, to `to_controller`,
  // with the rest of its group, in the group's order (the controller plans a group from its
  // members' consecutive requests), each announced diverted too.
  void Divert(uint32_t id, std::vector<uint32_t>* to_controller);
  // This rank's entry waiting on `id`, or null.
  TensorEntry* Find(uint32_t id) const;
  // A round decided `id`, whose entry leaves (its node kept for the next Wait).
  void Decided(uint32_t id);
  // A controller response goes to run: the instance of each id it names is over (the next may
  // take the fast path again; not while this rank's join of its set is in flight), a retired id
  // is no longer diverted, nor are a removed set's, and a join's response ends this rank's join.
  void Handed(const Response& response);
  // Nothing of this rank's waits or is held.
  bool empty() const { return hits_.empty() && held_.empty(); }
  // The job ends: forget the entries.
  void Drop();

 private:
  bool JoinedSet(int process_set) const;
  // Whether a hit of `process_set` waits here.
  bool HoldsHitOf(int process_set) const;
  // Whether a held join or removal must still wait (see Hold).
  bool MustHold(const TensorEntry* held) const;
  // The instance of `id` that went to the controller ran.
  void InstanceOver(uint32_t id);
  // Whether `id` goes to the controller while this rank's join of the job is in flight: a
  // grouped allreduce (kEveryRankCacheIdBit: the fast path never stands in for it).
  bool JoinDiverts(uint32_t id, const FastSpec& spec) const;

  // Constant after construction.
  const OpCache* const cache_;
  const Clock::TimePoint::duration patience_;

  struct Hit {
    TensorEntry* entry;
    TimePoint since;
    bool announced = false;  // in a round message of this rank already
  };
  std::map<uint32_t, Hit> hits_;  // waiting cached ops, by cache id
  // The node of the last hit a round decided: Wait reuses it, so that a repeated op allocates
  // no node (a small op's path allocates as little as it can).
  std::map<uint32_t, Hit>::node_type spare_hit_;
  // Joins and remove_process_set requests held back (Hold), in submission order.
  std::deque<TensorEntry*> held_;
  std::set<uint32_t> diverted_;           // ids that go to the controller until their name runs
  std::vector<uint32_t> newly_diverted_;  // diverted by this rank since its last message
  uint64_t foreign_reported_ = 0;         // OpCache::foreign_learned() at the last message
  bool joined_ = false;                   // this rank's join of the job is in flight
  std::vector<int> joined_sets_;          // sets whose join of this rank is in flight
};

}  // namespace kolo
