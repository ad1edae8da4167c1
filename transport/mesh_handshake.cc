#include "transport/mesh_handshake.h"

#include <cassert>

namespace kolo::transport {
namespace {

void PutWord(std::string* out, uint32_t value) {
  for (int shift = 24; shift >= 0; shift -= 8) out->push_back(static_cast<char>(value >> shift));
}

uint32_t GetWord(const char* p) {
  const auto* u = reinterpret_cast<const unsigned char*>(p);
  return (uint32_t{u[0]} << 24) | (uint32_t{u[1]} << 16) | (uint32_t{u[2]} << 8) | u[3];
}

}  // namespace

std::string EncodeMeshHello(const MeshHello& hello) {
  assert(hello.job_token.size() <= kMaxJobTokenBytes);
  std::string out;
  out.reserve(kMeshHelloHeaderBytes + hello.job_token.size());
  PutWord(&out, kMeshMagic);
  PutWord(&out, hello.version);
  PutWord(&out, static_cast<uint32_t>(hello.rank));
  PutWord(&out, static_cast<uint32_t>(hello.size));
  PutWord(&out, static_cast<uint32_t>(hello.job_token.size()));
  out += hello.job_token;
  return out;
}

size_t MeshHelloReader::BytesWanted() const {
  if (failed_ || complete_) return 0;
  if (filled_ < kMeshHelloHeaderBytes) return kMeshHelloHeaderBytes - filled_;
  return kMeshHelloHeaderBytes + token_bytes_ - filled_;
}

Status MeshHelloReader::Advance(size_t n) {
  assert(n <= BytesWanted());
  const size_t before = filled_;
  filled_ += n;
  if (before < 4 && filled_ >= 4 && GetWord(&buffer_[0]) != kMeshMagic) {
    failed_ = true;
    return Unavailable("not a kolo data-mesh connection (wrong magic)");
  }
  if (before < 8 && filled_ >= 8) {
    hello_.version = GetWord(&buffer_[4]);
    if (hello_.version != kMeshProtocolVersion) {
      failed_ = true;
      return Unavailable("data-mesh protocol version " + std::to_string(hello_.version) +
                         ", this rank speaks " + std::to_string(kMeshProtocolVersion));
    }
  }
  if (before < kMeshHelloHeaderBytes && filled_ >= kMeshHelloHeaderBytes) {
    hello_.rank = static_cast<int32_t>(GetWord(&buffer_[8]));
    hello_.size = static_cast<int32_t>(GetWord(&buffer_[12]));
    const uint32_t token_bytes = GetWord(&buffer_[16]);
    if (token_bytes > kMaxJobTokenBytes) {
      failed_ = true;
      return Unavailable("job token length " + std::to_string(token_bytes) + " exceeds " +
                         std::to_string(kMaxJobTokenBytes) + " bytes");
    }
    token_bytes_ = token_bytes;
  }
  if (filled_ >= kMeshHelloHeaderBytes && filled_ == kMeshHelloHeaderBytes + token_bytes_) {
    hello_.job_token.assign(&buffer_[kMeshHelloHeaderBytes], token_bytes_);
    complete_ = true;
  }
  return Status::Ok();
}

bool ConstantTimeEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

Status CheckPeerHello(const MeshHello& peer, int my_rank, int size, const std::string& job_token,
                      int expected_rank) {
  if (!ConstantTimeEquals(peer.job_token, job_token)) {
    return Unavailable("wrong job token (the peer belongs to another job or generation)");
  }
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

}  // namespace kolo::transport
