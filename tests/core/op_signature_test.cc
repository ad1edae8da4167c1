// OpSignature: one op's signature, compared and hashed in one place, and assigned as a whole
// between the structs that embed it (TensorMeta, Response, FastSpec, FusionKey).
#include "core/op_signature.h"

#include <catch2/catch.hpp>
#include <functional>
#include <type_traits>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/fusion/fusion_rule.h"
#include "core/loop/op_cache.h"
#include "core/messages.h"

using namespace kolo;

namespace {

template <typename T, typename = void>
struct Comparable : std::false_type {};
template <typename T>
struct Comparable<T, std::void_t<decltype(std::declval<const T&>() == std::declval<const T&>())>>
    : std::true_type {};

// A Response or a FastSpec is not equal to another because their signatures are.
static_assert(Comparable<OpSignature>::value);
static_assert(Comparable<TensorMeta>::value);
static_assert(!Comparable<Response>::value);
static_assert(!Comparable<FastSpec>::value);
static_assert(!Comparable<FusionKey>::value);

OpSignature Broadcast() {
  OpSignature s;
  s.op = OpType::kBroadcast;
  s.dtype = DataType::kFloat64;
  s.reduce_op = ReduceOp::kMax;
  s.prescale = 0.5;
  s.postscale = 2.0;
  s.root = 3;
  s.process_set = 2;
  return s;
}

}  // namespace

TEST_CASE("Signatures are equal, and hash alike, exactly when all seven fields are",
          "[core][op_signature]") {
  const OpSignature base = Broadcast();
  const OpSignatureHash hash;
  CHECK(base == Broadcast());
  CHECK(hash(base) == hash(Broadcast()));
  std::vector<std::function<void(OpSignature*)>> changes = {
      [](OpSignature* s) { s->op = OpType::kAllreduce; },
      [](OpSignature* s) { s->dtype = DataType::kFloat32; },
      [](OpSignature* s) { s->reduce_op = ReduceOp::kSum; },
      [](OpSignature* s) { s->prescale = 1.0; },
      [](OpSignature* s) { s->postscale = 1.0; },
      [](OpSignature* s) { s->root = 0; },
      [](OpSignature* s) { s->process_set = 0; },
  };
  std::unordered_set<OpSignature, OpSignatureHash> seen = {base};
  for (const auto& change : changes) {
    OpSignature other = base;
    change(&other);
    CHECK(other != base);
    seen.insert(other);
  }
  CHECK(seen.size() == changes.size() + 1);
  CHECK(seen.count(Broadcast()) == 1);
}

TEST_CASE("A signature passes from a tensor's metadata to its response and spec as a whole",
          "[core][op_signature]") {
  TensorMeta meta;
  meta.signature() = Broadcast();
  meta.name = "w";
  Response response;
  response.signature() = meta.signature();
  CHECK(response.signature() == Broadcast());
  FastSpec spec;
  spec.signature() = response.signature();
  CHECK(spec.signature() == meta.signature());
  OpSignature fused = meta.signature();
  fused.root = -1;  // fusion leaves the root out
  CHECK(FusionKey::Of(meta).signature() == fused);
  // Metadata that differs in its signature alone differs.
  TensorMeta other = meta;
  CHECK(other == meta);
  other.postscale = 3.0;
  CHECK(other != meta);
}

TEST_CASE("Fusion compares signatures but for the root and an allgather's reduction",
          "[core][op_signature][fusion]") {
  OpSignature a;
  a.op = OpType::kAllgather;
  OpSignature b = a;
  b.reduce_op = ReduceOp::kMax;
  b.prescale = 2.0;
  b.root = 5;
  CHECK(SameFusionKey(FusionKey::Of(a, Device::Cpu()), FusionKey::Of(b, Device::Cpu())));
  a.op = b.op = OpType::kAllreduce;
  CHECK_FALSE(SameFusionKey(FusionKey::Of(a, Device::Cpu()), FusionKey::Of(b, Device::Cpu())));
  b = a;
  b.root = 5;
  CHECK(SameFusionKey(FusionKey::Of(a, Device::Cpu()), FusionKey::Of(b, Device::Cpu())));
  b.process_set = 1;
  CHECK_FALSE(SameFusionKey(FusionKey::Of(a, Device::Cpu()), FusionKey::Of(b, Device::Cpu())));
  CHECK_FALSE(SameFusionKey(FusionKey::Of(a, Device::Cpu()), FusionKey::Of(a, Device::Cuda(0))));
}
