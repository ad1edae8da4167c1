// Fuzz target: the fast path's round messages (transport/round_codec.h), read from a peer's
// round connection, and the round bookkeeping they feed (core/loop/round_agreement.h). The input is
// a piece plan (one byte k, then k piece sizes) and the byte stream, fed to RoundStreamParser in
// those pieces. Checks: the messages it returns re-encode to exactly a prefix of the stream;
// after an error it stays failed; and RoundAgreement takes any message sequence (as from ranks
// 1 and 2 of 3) without crashing, every decision it makes being consistent with what it got.
#include <algorithm>
#include <string>
#include <vector>

#include "core/loop/round_agreement.h"
#include "fuzz/fuzz_input.h"
#include "transport/round_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kolo;
  using namespace kolo::transport;
  fuzz::FuzzInput in(data, size);
  std::vector<size_t> pieces;
  const size_t plan = in.Byte() % 16;
  for (size_t i = 0; i < plan; ++i) pieces.push_back(std::max<size_t>(1, in.Byte()));
  if (pieces.empty()) pieces.push_back(SIZE_MAX);
  const std::string stream = in.Rest();

  RoundStreamParser parser;
  std::vector<RoundMessage> messages;
  size_t fed = 0;
  bool failed = false;
  for (size_t piece = 0; fed < stream.size(); ++piece) {
    const size_t n = std::min(pieces[piece % pieces.size()], stream.size() - fed);
    const Status status = parser.Feed(stream.data() + fed, n);
    fed += n;
    if (!status.ok()) {
      failed = true;
      KOLO_FUZZ_CHECK(!parser.Feed("x", 1).ok(), "goes on after an error");
      break;
    }
    parser.Take(&messages);
  }
  std::string again;
  for (const RoundMessage& m : messages) {
    KOLO_FUZZ_CHECK(m.ready.size() <= kMaxRoundIds && m.diverted.size() <= kMaxRoundIds,
                    "a list of %zu + %zu ids", m.ready.size(), m.diverted.size());
    again += EncodeRoundMessage(m);
  }
  KOLO_FUZZ_CHECK(again == stream.substr(0, again.size()),
                  "re-encoding differs from the stream (%zu bytes)", again.size());
  KOLO_FUZZ_CHECK(failed || stream.size() - again.size() < kRoundHeaderBytes + 4 * 2 * kMaxRoundIds,
                  "an unparsed tail of %zu bytes without an error", stream.size() - again.size());

  // The bookkeeping: rank 0 of 3, peers' messages alternating between ranks 1 and 2, this
  // rank answering whenever it must.
  RoundAgreement rounds(0, 3);
  const auto now = std::chrono::steady_clock::now();
  for (size_t i = 0; i < messages.size(); ++i) {
    const uint64_t round = rounds.current_round();
    if (!rounds.Receive(1 + static_cast<int>(i % 2), messages[i]).ok()) continue;
    if (rounds.must_answer()) {
      RoundMessage mine;
      mine.ready = {1, 2, 3};
      mine.fusion_threshold = 1 << 20;
      mine.hierarchy_min_bytes = 1 << 16;
      rounds.RecordSent(&mine, now);
    }
    if (std::optional<RoundDecision> d = rounds.TakeDecision()) {
      KOLO_FUZZ_CHECK(d->round == round, "decided round %llu in round %llu",
                      static_cast<unsigned long long>(d->round),
                      static_cast<unsigned long long>(round));
      KOLO_FUZZ_CHECK(std::is_sorted(d->runnable.begin(), d->runnable.end()), "unsorted");
      for (uint32_t id : d->runnable) {
        KOLO_FUZZ_CHECK(!std::binary_search(d->diverted.begin(), d->diverted.end(), id),
                        "id %u both runnable and diverted", id);
      }
      KOLO_FUZZ_CHECK(d->fusion_threshold <= (1u << 20), "threshold above this rank's");
      KOLO_FUZZ_CHECK(d->hierarchy_min_bytes <= (1u << 16), "hierarchical rule above this rank's");
    }
  }
  return 0;
}
