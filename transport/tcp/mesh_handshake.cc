#include "transport/tcp/mesh_handshake.h"

#include "core/check.h"

namespace kolo::transport {
namespace {

void PutWord(std::string* out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}

uint32_t GetWord(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

uint64_t GetLong(const char* p) {
  return (uint64_t{GetWord(p)} << 32) | GetWord(p + 4);
}

// Payload layout of each kind: nonce bytes, then proof bytes.
size_t NonceBytesOf(MeshFrameKind kind) {
  return kind == MeshFrameKind::kProof ? 0 : kNonceBytes;
}
size_t ProofBytesOf(MeshFrameKind kind) {
  return kind == MeshFrameKind::kDial ? 0 : kMacBytes;
}

const char* KindName(MeshFrameKind kind) {
  switch (kind) {
    case MeshFrameKind::kDial:
      return "dial";
    case MeshFrameKind::kAccept:
      return "accept";
    case MeshFrameKind::kProof:
      return "proof";
  }
  return "unknown";
}

}  // namespace

std::string EncodeMeshFrame(const MeshFrame& frame) {
  KOLO_CHECK(frame.nonce.size() == NonceBytesOf(frame.kind)) << frame.nonce.size() << " bytes";
  KOLO_CHECK(frame.proof.size() == ProofBytesOf(frame.kind)) << frame.proof.size() << " bytes";
  const uint64_t payload = frame.nonce.size() + frame.proof.size();
  std::string out;
  out.reserve(kMeshFrameHeaderBytes + payload);
  PutWord(&out, kMeshMagic);
  PutWord(&out, frame.version);
  PutWord(&out, static_cast<uint32_t>(frame.kind));
  PutWord(&out, static_cast<uint32_t>(frame.rank));
  PutWord(&out, static_cast<uint32_t>(frame.size));
  PutWord(&out, static_cast<uint32_t>(payload >> 32));
  PutWord(&out, static_cast<uint32_t>(payload));
  out += frame.nonce;
  out += frame.proof;
  return out;
}

size_t MeshFrameReader::BytesWanted() const {
  if (failed_ || complete_) return 0;
  if (filled_ < kMeshFrameHeaderBytes) return kMeshFrameHeaderBytes - filled_;
  return kMeshFrameHeaderBytes + payload_bytes_ - filled_;
}

Status MeshFrameReader::Advance(size_t n) {
  KOLO_CHECK(n <= BytesWanted()) << "Advance(" << n << ") past the " << BytesWanted()
                                 << " bytes wanted";
  const size_t before = filled_;
  filled_ += n;
  auto arrived = [&](size_t end) { return before < end && filled_ >= end; };
  if (arrived(4) && GetWord(&buffer_[0]) != kMeshMagic) {
    failed_ = true;
    return Unavailable("not a kolo data-mesh connection (wrong magic)");
  }
  if (arrived(8)) {
    frame_.version = GetWord(&buffer_[4]);
    if (frame_.version != kMeshProtocolVersion) {
      failed_ = true;
      return Unavailable("data-mesh protocol version " + std::to_string(frame_.version) +
                         ", this rank speaks " + std::to_string(kMeshProtocolVersion));
    }
  }
  if (arrived(12)) {
    const uint32_t kind = GetWord(&buffer_[8]);
    if (kind < 1 || kind > 3) {
      failed_ = true;
      return Unavailable("unknown data-mesh handshake message kind " + std::to_string(kind));
    }
    frame_.kind = static_cast<MeshFrameKind>(kind);
  }
  if (arrived(kMeshFrameHeaderBytes)) {
    frame_.rank = static_cast<int32_t>(GetWord(&buffer_[12]));
    frame_.size = static_cast<int32_t>(GetWord(&buffer_[16]));
    const uint64_t payload = GetLong(&buffer_[20]);
    const size_t expected = NonceBytesOf(frame_.kind) + ProofBytesOf(frame_.kind);
    if (payload != expected) {
      failed_ = true;
      return Unavailable("handshake " + std::string(KindName(frame_.kind)) +
                         " message with a payload length of " + std::to_string(payload) +
                         " bytes; it must be " + std::to_string(expected));
    }
    payload_bytes_ = expected;
  }
  if (filled_ >= kMeshFrameHeaderBytes && filled_ == kMeshFrameHeaderBytes + payload_bytes_) {
    const char* payload = &buffer_[kMeshFrameHeaderBytes];
    const size_t nonce_bytes = NonceBytesOf(frame_.kind);
    frame_.nonce.assign(payload, nonce_bytes);
    frame_.proof.assign(payload + nonce_bytes, ProofBytesOf(frame_.kind));
    complete_ = true;
  }
  return Status::Ok();
}

Status CheckPeerIdentity(const MeshFrame& peer, int my_rank, int size, int expected_rank) {
  if (peer.size != size) {
    return Unavailable("peer claims rank " + std::to_string(peer.rank) + " of a job of size " +
                       std::to_string(peer.size) + ", this job has size " + std::to_string(size));
  }
  if (peer.rank < 0 || peer.rank >= size || peer.rank == my_rank) {
    return Unavailable("peer claims rank " + std::to_string(peer.rank) + ", not a valid peer of " +
                       "rank " + std::to_string(my_rank) + " in a job of size " +
                       std::to_string(size));
  }
  if (expected_rank >= 0 && peer.rank != expected_rank) {
    return Unavailable("peer claims rank " + std::to_string(peer.rank) + ", expected rank " +
                       std::to_string(expected_rank));
  }
  return Status::Ok();
}

std::string MeshProof(const MeshAuth& auth, MeshRole role, int dialler, int acceptor, int size,
                      const std::string& dialler_nonce, const std::string& acceptor_nonce) {
  const char* label = role == MeshRole::kDialler ? "kolo-mesh-v1/dialler" : "kolo-mesh-v1/acceptor";
  return Mac(auth.credentials.key, label,
             {auth.credentials.job_id, auth.generation, WordBytes(dialler), WordBytes(acceptor),
              WordBytes(size), dialler_nonce, acceptor_nonce});
}

}  // namespace kolo::transport
