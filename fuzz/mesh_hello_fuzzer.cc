// Fuzz target: the data-mesh handshake reader (transport/mesh_handshake.h), which parses the
// first bytes any process that connects to a rank's data port sends. The input is a piece plan
// (one byte k, then k piece sizes) and the byte stream, fed to MeshHelloReader in those
// pieces. Checks: the reader never asks for a byte past the hello (the data stream follows on
// the same socket), refuses a wrong magic or version or a token length over kMaxJobTokenBytes
// as soon as that field is in, and a complete hello re-encodes to exactly the bytes read.
//
// NOTE: the handshake is being replaced by an HMAC challenge-response on another branch; this
// target follows the current reader and is to be ported with it.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "fuzz/fuzz_input.h"
#include "transport/mesh_handshake.h"

namespace kolo::transport {
namespace {

uint32_t WordAt(const std::string& s, size_t offset) {
  const auto* u = reinterpret_cast<const unsigned char*>(s.data() + offset);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

// Whether the first `n` bytes of `stream` can still start a valid hello.
bool ValidPrefix(const std::string& stream, size_t n) {
  if (n >= 4 && WordAt(stream, 0) != kMeshMagic) return false;
  if (n >= 8 && WordAt(stream, 4) != kMeshProtocolVersion) return false;
  if (n >= kMeshHelloHeaderBytes && WordAt(stream, 16) > kMaxJobTokenBytes) return false;
  return true;
}

void CheckHello(const std::string& stream, size_t consumed, const MeshHello& hello,
                fuzz::FuzzInput* in) {
  KOLO_FUZZ_CHECK(consumed >= kMeshHelloHeaderBytes, "complete after %zu bytes", consumed);
  const size_t token_bytes = WordAt(stream, 16);
  KOLO_FUZZ_CHECK(consumed == kMeshHelloHeaderBytes + token_bytes,
                  "complete after %zu bytes, the hello has %zu", consumed,
                  kMeshHelloHeaderBytes + token_bytes);
  const std::string again = EncodeMeshHello(hello);
  KOLO_FUZZ_CHECK(again == stream.substr(0, consumed), "re-encoding differs (%zu vs %zu bytes)",
                  again.size(), consumed);
  // The checks of the accepting rank: OK exactly when size, token and rank all fit.
  const int size = static_cast<int>(in->Range(1, 8));
  const int my_rank = static_cast<int>(in->Range(0, size - 1));
  const bool same_token = in->Byte() % 2 == 0;
  const std::string token = same_token ? hello.job_token : hello.job_token + "x";
  const Status checked = CheckPeerHello(hello, my_rank, size, token, -1);
  const bool valid = same_token && hello.size == size && hello.rank >= 0 && hello.rank < size &&
                     hello.rank != my_rank;
  KOLO_FUZZ_CHECK(checked.ok() == valid, "CheckPeerHello says %s", checked.ToString().c_str());
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
  // The trailing bytes that follow the hello stand for the data stream behind it.
  const std::string stream = in.Rest();

  MeshHelloReader reader;
  size_t consumed = 0;
  bool failed = false;
  for (size_t piece = 0; reader.BytesWanted() > 0 && consumed < stream.size(); ++piece) {
    const size_t wanted = reader.BytesWanted();
    KOLO_FUZZ_CHECK(consumed + wanted <= kMeshHelloHeaderBytes + kMaxJobTokenBytes,
                    "wants %zu bytes after %zu", wanted, consumed);
    if (consumed >= kMeshHelloHeaderBytes) {
      KOLO_FUZZ_CHECK(consumed + wanted == kMeshHelloHeaderBytes + WordAt(stream, 16),
                      "wants %zu bytes after %zu, past the token", wanted, consumed);
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
    CheckHello(stream, consumed, reader.hello(), &tail);
  }
  return 0;
}
