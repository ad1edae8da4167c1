// The data-mesh connection handshake (DESIGN.md §6): the dialling rank sends a MeshHello, the
// accepting rank checks it and only then answers with its own, which the dialler checks in turn.
// Encoding, a bounded incremental parser, and the checks; used by transport/mesh_connector.cc.
// Value types and pure functions; no threading concerns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"

namespace kolo::transport {

constexpr uint32_t kMeshMagic = 0x4B4C4F4D;  // "KLOM"
constexpr uint32_t kMeshProtocolVersion = 1;
// The job token is a short digest; a longer length field is refused before reading it.
constexpr size_t kMaxJobTokenBytes = 256;
// magic, version, rank, size, token length: big-endian 32-bit words.
constexpr size_t kMeshHelloHeaderBytes = 20;

struct MeshHello {
  uint32_t version = kMeshProtocolVersion;
  int32_t rank = -1;
  int32_t size = 0;
  std::string job_token;
};

// The wire bytes of `hello` (with magic). job_token must be at most kMaxJobTokenBytes.
std::string EncodeMeshHello(const MeshHello& hello);

// Parses one MeshHello from a byte stream without reading past its end (the data stream
// follows it on the same socket) and without allocating: the buffer is fixed-size.
class MeshHelloReader {
 public:
  // Bytes to read next into WritePtr(); 0 once complete (or after an error).
  size_t BytesWanted() const;
  char* WritePtr() { return buffer_.data() + filled_; }
  // Takes `n` bytes that were written at WritePtr(). Fails on a wrong magic or version or an
  // oversized token length, as soon as the offending field has arrived.
  Status Advance(size_t n);
  bool complete() const { return complete_; }
  const MeshHello& hello() const { return hello_; }

 private:
  std::array<char, kMeshHelloHeaderBytes + kMaxJobTokenBytes> buffer_{};
  size_t filled_ = 0;
  size_t token_bytes_ = 0;  // valid once the header is in
  bool failed_ = false;
  bool complete_ = false;
  MeshHello hello_;
};

// Checks a peer's hello against this rank's view of the job: same size and token, a rank in
// range other than ours, and (if `expected_rank` >= 0) exactly that rank. The message says which
// check failed, never the token itself.
Status CheckPeerHello(const MeshHello& peer, int my_rank, int size, const std::string& job_token,
                      int expected_rank);

// Compares without an early exit, so the time taken does not reveal a matching prefix.
bool ConstantTimeEquals(const std::string& a, const std::string& b);

}  // namespace kolo::transport
