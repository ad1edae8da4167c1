// Fuzz target: the data-mesh handshake reader (transport/tcp/mesh_handshake.h), which parses the
// first bytes any process that connects to a rank's data port sends, before it has proven
// anything. The input is a piece plan (one byte k, then k piece sizes) and the byte stream, fed
// to MeshFrameReader in those pieces. Checks: the reader never asks for a byte past the frame
// (the next frame or the data stream follows on the same socket); it refuses a wrong magic,
// version or kind, or a payload length other than the kind's (2^63 included), as soon as that
// field is in; a complete frame re-encodes to exactly the bytes read; and CheckPeerIdentity
// accepts exactly the identities that fit the job.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "transport/tcp/mesh_handshake.h"

namespace kolo::transport {
namespace {

uint64_t BigEndianAt(const std::string& s, size_t offset, size_t bytes) {
  uint64_t value = 0;
  for (size_t i = 0; i < bytes; ++i) {
    value = (value << 8) | static_cast<unsigned char>(s[offset + i]);
  }
  return value;
}

// The payload bytes a frame of `kind` carries; 0 for an unknown kind.
size_t PayloadOf(uint64_t kind) {
  switch (kind) {
    case 1:
      return kNonceBytes;  // Dial
    case 2:
      return kNonceBytes + kMacBytes;  // Accept
    case 3:
      return kMacBytes;  // Proof
    default:
      return 0;
  }
}

// Whether the first `n` bytes of `stream` can still start a valid frame.
bool ValidPrefix(const std::string& stream, size_t n) {
  if (n >= 4 && BigEndianAt(stream, 0, 4) != kMeshMagic) return false;
  if (n >= 8 && BigEndianAt(stream, 4, 4) != kMeshProtocolVersion) return false;
  if (n >= 12 && PayloadOf(BigEndianAt(stream, 8, 4)) == 0) return false;
  if (n >= kMeshFrameHeaderBytes &&
      BigEndianAt(stream, 20, 8) != PayloadOf(BigEndianAt(stream, 8, 4))) {
    return false;
  }
  return true;
}

void CheckFrame(const std::string& stream, size_t consumed, const MeshFrame& frame,
                fuzz::FuzzInput* in) {
  const size_t expected = kMeshFrameHeaderBytes + PayloadOf(BigEndianAt(stream, 8, 4));
  KOLO_FUZZ_CHECK(consumed == expected, "complete after %zu bytes, the frame has %zu", consumed,
                  expected);
  const std::string again = EncodeMeshFrame(frame);
  KOLO_FUZZ_CHECK(again == stream.substr(0, consumed), "re-encoding differs (%zu vs %zu bytes)",
                  again.size(), consumed);
  // The identity checks of the accepting rank: OK exactly when size and rank fit.
  const int size = static_cast<int>(in->Range(1, 8));
  const int my_rank = static_cast<int>(in->Range(0, size - 1));
  const int expected_rank = in->Byte() % 2 == 0 ? -1 : static_cast<int>(in->Range(0, size - 1));
  const Status checked = CheckPeerIdentity(frame, my_rank, size, expected_rank);
  const bool valid = frame.size == size && frame.rank >= 0 && frame.rank < size &&
                     frame.rank != my_rank && (expected_rank < 0 || frame.rank == expected_rank);
  KOLO_FUZZ_CHECK(checked.ok() == valid, "CheckPeerIdentity says %s", checked.ToString().c_str());
}

}  // namespace
}  // namespace kolo::transport

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kolo::transport;
  kolo::fuzz::FuzzInput in(data, size);
  std::vector<size_t> pieces;
  const size_t plan = in.Byte() % 16;
  for (size_t i = 0; i < plan; ++i) pieces.push_back(std::max<size_t>(1, in.Byte()));
  if (pieces.empty()) pieces.push_back(SIZE_MAX);
  // The trailing bytes that follow the frame stand for what comes after it on the socket.
  const std::string stream = in.Rest();

  MeshFrameReader reader;
  size_t consumed = 0;
  bool failed = false;
  for (size_t piece = 0; reader.BytesWanted() > 0 && consumed < stream.size(); ++piece) {
    const size_t wanted = reader.BytesWanted();
    KOLO_FUZZ_CHECK(consumed + wanted <= kMeshFrameHeaderBytes + kMaxMeshPayloadBytes,
                    "wants %zu bytes after %zu", wanted, consumed);
    if (consumed >= kMeshFrameHeaderBytes) {
      KOLO_FUZZ_CHECK(
          consumed + wanted == kMeshFrameHeaderBytes + PayloadOf(BigEndianAt(stream, 8, 4)),
          "wants %zu bytes after %zu, past the frame", wanted, consumed);
    }
    const size_t n = std::min({wanted, pieces[piece % pieces.size()], stream.size() - consumed});
    std::memcpy(reader.WritePtr(), stream.data() + consumed, n);
    const kolo::Status status = reader.Advance(n);
    consumed += n;
    if (!status.ok()) {
      KOLO_FUZZ_CHECK(!ValidPrefix(stream, consumed), "refused a valid prefix: %s",
                      status.ToString().c_str());
      KOLO_FUZZ_CHECK(reader.BytesWanted() == 0 && !reader.complete(), "goes on after an error");
      failed = true;
      break;
    }
    KOLO_FUZZ_CHECK(ValidPrefix(stream, consumed), "accepted an invalid prefix of %zu bytes",
                    consumed);
  }
  if (reader.complete()) {
    KOLO_FUZZ_CHECK(!failed && reader.BytesWanted() == 0, "complete but wants more");
    kolo::fuzz::FuzzInput tail(reinterpret_cast<const uint8_t*>(stream.data()) + consumed,
                               stream.size() - consumed);
    CheckFrame(stream, consumed, reader.frame(), &tail);
  }
  return 0;
}
