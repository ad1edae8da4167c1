// HMAC-SHA256 challenge-response primitives shared by the control plane (gRPC stream) and the
// data-mesh handshake (DESIGN.md §6, docs/SECURITY.md): the job's key and identity, fresh
// nonces, MACs over length-prefixed fields with a protocol label, constant-time comparison.
// OpenSSL does the cryptography. Value types and pure functions; thread-safe.
#pragma once

#include <cstddef>
#include <initializer_list>
#include <string>
#include <string_view>

#include "kolo/status.h"

namespace kolo::transport {

constexpr size_t kNonceBytes = 32;
constexpr size_t kMacBytes = 32;  // HMAC-SHA256

// What every rank of one job shares. `key` may be empty (a hand-started job without a
// secret): the handshakes still run, binding the job id, but prove nothing.
struct JobCredentials {
  std::string key;     // the secret's raw bytes; never logged
  std::string job_id;  // KOLO_JOB_ID, not secret; "" when unset
};

// `n` bytes from the OS's CSPRNG (OpenSSL RAND_bytes). Fails only if the generator does.
StatusOr<std::string> RandomBytes(size_t n);

// HMAC-SHA256(key, label | f1 | f2 | ...) where label and every field are written with an
// 8-byte big-endian length first, so that no two field lists give the same input.
std::string Mac(const std::string& key, std::string_view label,
                std::initializer_list<std::string_view> fields);

// True if `a` and `b` are equal; the time taken does not depend on where they differ.
bool MacEquals(const std::string& a, const std::string& b);

// Decodes hex text (either case, even length) to bytes. The error never quotes the text,
// which may be a secret; it names `what` and the offending position.
StatusOr<std::string> DecodeHex(const std::string& text, const std::string& what);

// Lower-case hex of `bytes`.
std::string EncodeHex(std::string_view bytes);

// A 32-bit integer as 4 big-endian bytes, for MAC fields.
std::string WordBytes(int64_t value);

}  // namespace kolo::transport
