#include "tests/support/sim_gpu/sim_collective_ops.h"

#include <cstring>

#include "ops/gpu/collective_error.h"
#include "ops/reduce_kernels.h"

namespace kolo::gpu::sim {
namespace {

constexpr uint32_t kContributionMagic = 0x6b6f6331;  // "koc1"
constexpr uint32_t kReplyMagic = 0x6b6f7231;         // "kor1"

// Fixed-size fields and byte strings, in host byte order (every rank runs on this machine).
class Writer {
 public:
  template <typename T>
  void Put(const T& value) {
    const auto* p = reinterpret_cast<const uint8_t*>(&value);
    bytes_.insert(bytes_.end(), p, p + sizeof(T));
  }
  void PutBytes(const void* data, size_t n) {
    Put<uint64_t>(n);
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + n);
  }
  std::vector<uint8_t> Take() { return std::move(bytes_); }

 private:
  std::vector<uint8_t> bytes_;
};

class Reader {
 public:
  explicit Reader(const std::vector<uint8_t>& bytes) : bytes_(bytes) {}
  template <typename T>
  bool Get(T* value) {
    if (bytes_.size() - at_ < sizeof(T)) return false;
    std::memcpy(value, bytes_.data() + at_, sizeof(T));
    at_ += sizeof(T);
    return true;
  }
  bool GetBytes(std::vector<uint8_t>* out) {
    uint64_t n = 0;
    if (!Get(&n) || bytes_.size() - at_ < n) return false;
    out->assign(bytes_.begin() + static_cast<ptrdiff_t>(at_),
                bytes_.begin() + static_cast<ptrdiff_t>(at_ + n));
    at_ += n;
    return true;
  }
  bool GetString(std::string* out) {
    std::vector<uint8_t> bytes;
    if (!GetBytes(&bytes)) return false;
    out->assign(bytes.begin(), bytes.end());
    return true;
  }
  bool done() const { return at_ == bytes_.size(); }

 private:
  const std::vector<uint8_t>& bytes_;
  size_t at_ = 0;
};

std::string Describe(const Contribution& c) {
  return std::string(OpCall(c.kind)) + " #" + std::to_string(c.seq) + " of " +
         std::to_string(c.count) + " " + DataTypeName(c.dtype) + " (op " + ReduceOpName(c.op) +
         ", root " + std::to_string(c.root) + ", " + std::to_string(c.p2p.size()) + " p2p)";
}

std::vector<Reply> ErrorForAll(size_t size, int code, const std::string& text) {
  Reply reply;
  reply.error = code;
  reply.error_text = text;
  return std::vector<Reply>(size, reply);
}

// The reduction of every rank's payload in rank order, then the division of an average.
std::vector<uint8_t> ReduceAll(const std::vector<Contribution>& by_rank, size_t count) {
  const Contribution& first = by_rank[0];
  std::vector<uint8_t> acc = first.payload;
  for (size_t r = 1; r < by_rank.size(); ++r) {
    ops::Reduce(acc.data(), by_rank[r].payload.data(), count, first.dtype, first.op);
  }
  if (first.op == ReduceOp::kAverage && count > 0) {
    const auto size = static_cast<int64_t>(by_rank.size());
    if (IsFloatingPoint(first.dtype)) {
      ops::ScaleCopy(acc.data(), acc.data(), count, first.dtype, 1.0 / static_cast<double>(size));
    } else {
      ops::DivideInPlace(acc.data(), count, first.dtype, size);
    }
  }
  return acc;
}

std::vector<Reply> MatchSendRecv(const std::vector<Contribution>& by_rank) {
  const size_t size = by_rank.size();
  // sends[p][r]: the payload slices rank p sends to rank r, in order.
  std::vector<std::vector<std::vector<std::vector<uint8_t>>>> sends(
      size, std::vector<std::vector<std::vector<uint8_t>>>(size));
  for (size_t p = 0; p < size; ++p) {
    size_t at = 0;
    for (const P2pEntry& e : by_rank[p].p2p) {
      if (e.send == 0) continue;
      const auto* begin = by_rank[p].payload.data() + at;
      sends[p][static_cast<size_t>(e.peer)].emplace_back(begin, begin + e.bytes);
      at += e.bytes;
    }
  }
  std::vector<Reply> replies(size);
  for (size_t r = 0; r < size; ++r) {
    std::vector<size_t> taken(size, 0);
    for (const P2pEntry& e : by_rank[r].p2p) {
      if (e.send != 0) continue;
      const auto p = static_cast<size_t>(e.peer);
      const std::string pair = "rank " + std::to_string(r) + "'s Recv #" +
                               std::to_string(taken[p] + 1) + " from rank " + std::to_string(p);
      if (taken[p] >= sends[p][r].size()) {
        return ErrorForAll(size, kNcclInvalidUsage, pair + " has no matching Send");
      }
      const std::vector<uint8_t>& data = sends[p][r][taken[p]++];
      if (data.size() != e.bytes) {
        return ErrorForAll(size, kNcclInvalidUsage,
                           pair + " expects " + std::to_string(e.bytes) + " bytes, the Send has " +
                               std::to_string(data.size()));
      }
      replies[r].payload.insert(replies[r].payload.end(), data.begin(), data.end());
    }
    for (size_t p = 0; p < size; ++p) {
      if (taken[p] < sends[p][r].size()) {
        // Every rank's receives are matched in turn, so unmatched sends show up here.
        return ErrorForAll(size, kNcclInvalidUsage,
                           "rank " + std::to_string(p) + " sends to rank " + std::to_string(r) +
                               " more than it receives");
      }
    }
  }
  return replies;
}

}  // namespace

const char* OpCall(OpKind kind) {
  switch (kind) {
    case OpKind::kAllReduce:
      return "ncclAllReduce";
    case OpKind::kBroadcast:
      return "ncclBroadcast";
    case OpKind::kAllGather:
      return "ncclAllGather";
    case OpKind::kReduceScatter:
      return "ncclReduceScatter";
    case OpKind::kSendRecv:
      return "ncclGroupEnd";
  }
  return "nccl?";
}

std::vector<uint8_t> Encode(const Contribution& c) {
  Writer w;
  w.Put(kContributionMagic);
  w.Put(static_cast<uint32_t>(c.kind));
  w.Put(static_cast<int32_t>(c.dtype));
  w.Put(static_cast<int32_t>(c.op));
  w.Put(c.root);
  w.Put(c.count);
  w.Put(c.seq);
  w.Put(c.error);
  w.PutBytes(c.error_text.data(), c.error_text.size());
  w.Put<uint64_t>(c.p2p.size());
  for (const P2pEntry& e : c.p2p) w.Put(e);
  w.PutBytes(c.payload.data(), c.payload.size());
  return w.Take();
}

StatusOr<Contribution> DecodeContribution(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  Contribution c;
  uint32_t magic = 0, kind = 0;
  int32_t dtype = 0, op = 0;
  uint64_t entries = 0;
  bool ok = r.Get(&magic) && magic == kContributionMagic && r.Get(&kind) && r.Get(&dtype) &&
            r.Get(&op) && r.Get(&c.root) && r.Get(&c.count) && r.Get(&c.seq) && r.Get(&c.error) &&
            r.GetString(&c.error_text) && r.Get(&entries) && entries <= bytes.size();
  for (uint64_t i = 0; ok && i < entries; ++i) {
    P2pEntry e;
    ok = r.Get(&e);
    c.p2p.push_back(e);
  }
  ok = ok && r.GetBytes(&c.payload) && r.done();
  if (!ok) return Internal("malformed contribution of " + std::to_string(bytes.size()) + " bytes");
  c.kind = static_cast<OpKind>(kind);
  c.dtype = static_cast<DataType>(dtype);
  c.op = static_cast<ReduceOp>(op);
  return c;
}

std::vector<uint8_t> Encode(const Reply& reply) {
  Writer w;
  w.Put(kReplyMagic);
  w.Put(reply.error);
  w.PutBytes(reply.error_text.data(), reply.error_text.size());
  w.PutBytes(reply.payload.data(), reply.payload.size());
  return w.Take();
}

StatusOr<Reply> DecodeReply(const std::vector<uint8_t>& bytes) {
  Reader r(bytes);
  Reply reply;
  uint32_t magic = 0;
  if (!(r.Get(&magic) && magic == kReplyMagic && r.Get(&reply.error) &&
        r.GetString(&reply.error_text) && r.GetBytes(&reply.payload) && r.done())) {
    return Internal("malformed reply of " + std::to_string(bytes.size()) + " bytes");
  }
  return reply;
}

std::vector<Reply> Combine(const std::vector<Contribution>& by_rank) {
  const size_t size = by_rank.size();
  for (size_t r = 0; r < size; ++r) {
    if (by_rank[r].error != 0) {
      return ErrorForAll(size, kNcclRemoteError,
                         "rank " + std::to_string(r) + " failed: " + by_rank[r].error_text);
    }
  }
  const Contribution& first = by_rank[0];
  for (size_t r = 1; r < size; ++r) {
    const Contribution& c = by_rank[r];
    const bool same =
        c.kind == first.kind && c.seq == first.seq &&
        (c.kind == OpKind::kSendRecv || (c.dtype == first.dtype && c.op == first.op &&
                                         c.root == first.root && c.count == first.count));
    if (!same) {
      return ErrorForAll(size, kNcclInvalidUsage,
                         "ranks disagree: rank 0 runs " + Describe(first) + ", rank " +
                             std::to_string(r) + " " + Describe(c));
    }
  }
  const auto count = static_cast<size_t>(first.count);
  const size_t esize = DataTypeSize(first.dtype);
  std::vector<Reply> replies(size);
  switch (first.kind) {
    case OpKind::kAllReduce: {
      const std::vector<uint8_t> acc = ReduceAll(by_rank, count);
      for (Reply& reply : replies) reply.payload = acc;
      return replies;
    }
    case OpKind::kBroadcast:
      if (first.root < 0 || static_cast<size_t>(first.root) >= size) {
        return ErrorForAll(size, kNcclInvalidArgument,
                           "root " + std::to_string(first.root) + " is not a rank");
      }
      for (Reply& reply : replies) reply.payload = by_rank[static_cast<size_t>(first.root)].payload;
      return replies;
    case OpKind::kAllGather: {
      std::vector<uint8_t> all;
      for (const Contribution& c : by_rank)
        all.insert(all.end(), c.payload.begin(), c.payload.end());
      for (Reply& reply : replies) reply.payload = all;
      return replies;
    }
    case OpKind::kReduceScatter: {
      const std::vector<uint8_t> acc = ReduceAll(by_rank, count * size);
      for (size_t r = 0; r < size; ++r) {
        const auto* begin = acc.data() + r * count * esize;
        replies[r].payload.assign(begin, begin + count * esize);
      }
      return replies;
    }
    case OpKind::kSendRecv:
      return MatchSendRecv(by_rank);
  }
  return ErrorForAll(size, kNcclInternalError, "unknown op " + Describe(first));
}

}  // namespace kolo::gpu::sim
