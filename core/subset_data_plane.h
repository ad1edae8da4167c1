// SubsetDataPlane: a DataPlane over some of the ranks of another (a process set's members,
// core/process_sets.h), so that the ring algorithms of ops/ run among them unchanged: rank()
// and size() count within the subset, and Exchange maps subset ranks to the base plane's.
// The base (the full TCP mesh) connects every pair already; since every rank runs the job's
// responses in one order, any two members see their common exchanges in the same order.
//
// Threading: as DataPlane (Exchange on the background thread only; Interrupt from any thread).
#pragma once

#include <string>
#include <vector>

#include "core/data_plane.h"

namespace kolo {

class SubsetDataPlane final : public DataPlane {
 public:
  // `ranks`: the subset's ranks of `base`, ascending, holding base.rank(). `base` must outlive
  // this plane.
  SubsetDataPlane(DataPlane& base, std::vector<int> ranks);

  int rank() const override { return rank_; }
  int size() const override { return static_cast<int>(ranks_.size()); }
  Status Exchange(int send_to, int recv_from, StreamExchange& exchange,
                  const std::string& what) override;
  void Interrupt(const Status& why) override { base_.Interrupt(why); }

 private:
  DataPlane& base_;
  const std::vector<int> ranks_;
  int rank_ = -1;
};

}  // namespace kolo
