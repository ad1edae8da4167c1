// The data-mesh connection handshake (DESIGN.md §6, docs/SECURITY.md): a mutual HMAC
// challenge-response bound to the job, its generation and both ranks.
//   dialler  -> acceptor: Dial   {rank, size, dialler nonce}
//   acceptor -> dialler:  Accept {rank, size, acceptor nonce, acceptor proof}
//   dialler  -> acceptor: Proof  {rank, size, dialler proof}
// Each proof is an HMAC with the job key over the job id, the generation, both ranks, the size
// and both nonces, under a label of its own (so one side's proof is never valid as the other's).
// A fresh nonce per connection makes a recorded proof useless on another connection.
// Encoding, a bounded incremental parser, and the checks; used by transport/tcp/mesh_connector.cc.
// Value types and pure functions; no threading concerns.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

#include "kolo/status.h"
#include "transport/auth/hmac_auth.h"

namespace kolo::transport {

constexpr uint32_t kMeshMagic = 0x4B4C4F4D;  // "KLOM"
constexpr uint32_t kMeshProtocolVersion = 2;
// magic, version, kind, rank, size (big-endian 32-bit words), payload length (64-bit).
constexpr size_t kMeshFrameHeaderBytes = 28;
// The largest payload (Accept: nonce and proof). A longer length field is refused as soon as
// it has arrived, before reading or allocating anything for it.
constexpr size_t kMaxMeshPayloadBytes = kNonceBytes + kMacBytes;

enum class MeshFrameKind : uint32_t { kDial = 1, kAccept = 2, kProof = 3 };

struct MeshFrame {
  uint32_t version = kMeshProtocolVersion;
  MeshFrameKind kind = MeshFrameKind::kDial;
  int32_t rank = -1;
  int32_t size = 0;
  std::string nonce;  // kDial, kAccept: kNonceBytes
  std::string proof;  // kAccept, kProof: kMacBytes
};

// The wire bytes of `frame` (with magic). Its nonce and proof must have the sizes its kind
// requires.
std::string EncodeMeshFrame(const MeshFrame& frame);

// Parses one frame from a byte stream without reading past its end (the next frame or the data
// stream follows on the same socket) and without allocating: the buffer is fixed-size.
class MeshFrameReader {
 public:
  // Bytes to read next into WritePtr(); 0 once complete (or after an error).
  size_t BytesWanted() const;
  char* WritePtr() { return buffer_.data() + filled_; }
  // Takes `n` bytes that were written at WritePtr(). Fails on a wrong magic, version or kind,
  // or a payload length other than the kind's, as soon as the offending field has arrived.
  Status Advance(size_t n);
  bool complete() const { return complete_; }
  const MeshFrame& frame() const { return frame_; }

 private:
  std::array<char, kMeshFrameHeaderBytes + kMaxMeshPayloadBytes> buffer_{};
  size_t filled_ = 0;
  size_t payload_bytes_ = 0;  // valid once the header is in
  bool failed_ = false;
  bool complete_ = false;
  MeshFrame frame_;
};

// Checks a peer's claimed identity against this rank's view of the job: same size, a rank in
// range other than ours, and (if `expected_rank` >= 0) exactly that rank.
Status CheckPeerIdentity(const MeshFrame& peer, int my_rank, int size, int expected_rank);

// What both ends of every data connection of one mesh generation share.
struct MeshAuth {
  JobCredentials credentials;
  std::string generation;  // from the controller's Welcome; "" in tests without a controller
};

enum class MeshRole { kDialler, kAcceptor };

// The proof `role` sends on the connection between `dialler` and `acceptor`.
std::string MeshProof(const MeshAuth& auth, MeshRole role, int dialler, int acceptor, int size,
                      const std::string& dialler_nonce, const std::string& acceptor_nonce);

}  // namespace kolo::transport
