// OpNamer (python/csrc/c10d/op_namer.h): the names kolo's torch.distributed backend gives c10d's
// unnamed collectives. Plain C++, no torch: what two ranks get from the same calls, and what a
// training loop's repetitions cost in distinct names.
#include "python/csrc/c10d/op_namer.h"

#include <catch2/catch.hpp>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kolo::torch_ext {
namespace {

uint64_t Sig(int64_t op, std::vector<int64_t> shape) {
  return Signature().Add(op).Add(shape).value();
}

TEST_CASE("Two ranks issuing the same collectives get the same names", "[torch][c10d]") {
  OpNamer a("c10d.0");
  OpNamer b("c10d.0");
  for (int i = 0; i < 50; ++i) {
    const uint64_t sig = Sig(i % 3, {i % 7, 2});
    CHECK(a.Next(sig) == b.Next(sig));
  }
  CHECK(a.sequence() == 50);
}

TEST_CASE("A rank whose collective differs meets the others under the same name, then not",
          "[torch][c10d]") {
  OpNamer a("c10d.0");
  OpNamer b("c10d.0");
  a.Next(Sig(0, {4}));
  b.Next(Sig(0, {4}));
  // The diverging collective itself is named after what came before it: kolo compares the two.
  CHECK(a.Next(Sig(0, {4})) == b.Next(Sig(0, {8})));
  // After it the contexts differ (the backend fails the group's later ops instead of waiting).
  CHECK(a.Next(Sig(0, {4})) != b.Next(Sig(0, {4})));
}

TEST_CASE("A training loop's collectives reuse kSlots names each", "[torch][c10d]") {
  OpNamer namer("c10d.0");
  // An epoch-like loop: a broadcast, then three bucket allreduces of different sizes.
  const std::vector<uint64_t> step = {Sig(2, {10}), Sig(0, {100}), Sig(0, {200}), Sig(0, {50})};
  std::set<std::string> names;
  std::map<std::string, int> uses;
  for (int iteration = 0; iteration < 40; ++iteration) {
    for (uint64_t sig : step) {
      const std::string name = namer.Next(sig);
      names.insert(name);
      ++uses[name];
    }
  }
  // Each position in the step has one context, which cycles through kSlots names (the first
  // collective's context is the empty one once, then the step's last one).
  CHECK(names.size() <= step.size() * OpNamer::kSlots + 1);
  CHECK(names.size() >= step.size() * OpNamer::kSlots);
}

TEST_CASE("Consecutive collectives of one context get kSlots different names before a repeat",
          "[torch][c10d]") {
  OpNamer namer("c10d.3");
  const uint64_t sig = Sig(0, {1024});
  std::vector<std::string> names;
  for (uint32_t i = 0; i <= 2 * OpNamer::kSlots; ++i) names.push_back(namer.Next(sig));
  // names[0] has the empty context; names[1..] cycle with period kSlots.
  std::set<std::string> window(names.begin() + 1, names.begin() + 1 + OpNamer::kSlots);
  CHECK(window.size() == OpNamer::kSlots);
  CHECK(names[1] == names[1 + OpNamer::kSlots]);
  CHECK(names[1].rfind("c10d.3/", 0) == 0);
}

TEST_CASE("A retracted collective does not count: the next one gets its name", "[torch][c10d]") {
  OpNamer a("c10d.0");
  OpNamer b("c10d.0");
  a.Next(Sig(0, {4}));
  b.Next(Sig(0, {4}));
  const std::string refused = a.Next(Sig(5, {1}));  // refused on rank a before kolo took it
  a.Retract();
  CHECK(a.sequence() == 1);
  const std::string next_a = a.Next(Sig(0, {2}));
  CHECK(next_a == refused);
  CHECK(next_a == b.Next(Sig(0, {2})));
  CHECK(a.Next(Sig(0, {2})) == b.Next(Sig(0, {2})));
}

TEST_CASE("Signatures tell apart what kolo compares", "[torch][c10d]") {
  CHECK(Sig(0, {2, 3}) != Sig(0, {3, 2}));
  CHECK(Sig(0, {6}) != Sig(0, {6, 1}));
  CHECK(Sig(0, {4}) != Sig(1, {4}));
  CHECK(Signature().Add(1.0).value() != Signature().Add(0.5).value());
  CHECK(Sig(0, {4}) == Sig(0, {4}));
}

}  // namespace
}  // namespace kolo::torch_ext
