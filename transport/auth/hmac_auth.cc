#include "transport/auth/hmac_auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "core/check.h"

namespace kolo::transport {
namespace {

void AppendField(std::string* out, std::string_view field) {
  const uint64_t n = field.size();
  for (int shift = 56; shift >= 0; shift -= 8) out->push_back(static_cast<char>(n >> shift));
  out->append(field.data(), field.size());
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

StatusOr<std::string> RandomBytes(size_t n) {
  std::string bytes(n, '\0');
  if (n > 0 &&
      RAND_bytes(reinterpret_cast<unsigned char*>(bytes.data()), static_cast<int>(n)) != 1) {
    return Internal("the random number generator failed (OpenSSL RAND_bytes)");
  }
  return bytes;
}

std::string Mac(const std::string& key, std::string_view label,
                std::initializer_list<std::string_view> fields) {
  std::string input;
  AppendField(&input, label);
  for (std::string_view field : fields) AppendField(&input, field);
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int out_len = 0;
  // An empty key is valid for HMAC; OpenSSL wants a non-null pointer for it.
  static const unsigned char kEmpty = 0;
  const void* key_data = key.empty() ? &kEmpty : static_cast<const void*>(key.data());
  const unsigned char* result =
      HMAC(EVP_sha256(), key_data, static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(input.data()), input.size(), out, &out_len);
  KOLO_CHECK(result != nullptr && out_len == kMacBytes) << "HMAC-SHA256 failed in OpenSSL";
  return std::string(reinterpret_cast<const char*>(out), out_len);
}

bool MacEquals(const std::string& a, const std::string& b) {
  if (a.size() != b.size()) return false;  // sizes are public (kMacBytes)
  return a.empty() || CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

StatusOr<std::string> DecodeHex(const std::string& text, const std::string& what) {
  if (text.size() % 2 != 0) {
    return InvalidArgument(what + " must be hex digits in pairs; it has " +
                           std::to_string(text.size()) + " characters");
  }
  std::string bytes;
  bytes.reserve(text.size() / 2);
  for (size_t i = 0; i < text.size(); i += 2) {
    const int hi = HexValue(text[i]);
    const int lo = HexValue(text[i + 1]);
    if (hi < 0 || lo < 0) {
      return InvalidArgument(what + " must be hex digits; character " +
                             std::to_string(i + (hi < 0 ? 1 : 2)) + " is not one");
    }
    bytes.push_back(static_cast<char>(hi << 4 | lo));
  }
  return bytes;
}

std::string EncodeHex(std::string_view bytes) {
  static const char kHex[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * bytes.size());
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

std::string WordBytes(int64_t value) {
  std::string out;
  const auto v = static_cast<uint32_t>(value);
  for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>(v >> shift));
  return out;
}

}  // namespace kolo::transport
