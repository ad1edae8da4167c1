#include "transport/grpc/first_bytes.h"

#include <algorithm>
#include <cstdio>

namespace kolo::transport {
namespace {

constexpr size_t kMaxQuoted = 40;  // characters of a request line quoted in the log

bool IsUpper(char c) {
  return c >= 'A' && c <= 'Z';
}

// `bytes` up to the first space, CR or LF (at most kMaxQuoted), non-printables as '?'.
std::string Token(std::string_view bytes) {
  std::string token;
  for (char c : bytes) {
    if (c == ' ' || c == '\r' || c == '\n' || token.size() == kMaxQuoted) break;
    token += (c > ' ' && c < 0x7f) ? c : '?';
  }
  return token;
}

// "GET" or "POST" ...: 1 to 10 capital letters, then a space.
bool StartsWithMethod(std::string_view bytes) {
  size_t letters = 0;
  while (letters < bytes.size() && letters <= 10 && IsUpper(bytes[letters])) ++letters;
  return letters >= 1 && letters <= 10 && letters < bytes.size() && bytes[letters] == ' ';
}

std::string Hex(std::string_view bytes, size_t count) {
  std::string out;
  for (size_t i = 0; i < std::min(count, bytes.size()); ++i) {
    char digits[4];
    std::snprintf(digits, sizeof(digits), "%s%02x", i == 0 ? "" : " ",
                  static_cast<unsigned>(static_cast<unsigned char>(bytes[i])));
    out += digits;
  }
  return out;
}

}  // namespace

FirstBytes ClassifyFirstBytes(std::string_view bytes, bool more_follow) {
  const size_t compared = std::min(bytes.size(), kHttp2Preface.size());
  if (bytes.substr(0, compared) == kHttp2Preface.substr(0, compared)) {
    return {compared == kHttp2Preface.size() ? FirstBytes::Kind::kPreface
                                             : FirstBytes::Kind::kPartialPreface,
            "", ""};
  }
  if (StartsWithMethod(bytes)) {
    const std::string method = Token(bytes);
    const std::string target = Token(bytes.substr(method.size() + 1));
    return {FirstBytes::Kind::kHttp1, "http1",
            "an HTTP/1 request (" + method + (target.empty() ? "" : " " + target) +
                "), not gRPC; the controller port only serves kolo's own workers"};
  }
  if (bytes.size() >= 2 && bytes[0] == '\x16' && bytes[1] == '\x03') {
    return {FirstBytes::Kind::kTls, "tls",
            "a TLS handshake, but this controller serves plaintext (rank 0 has no "
            "KOLO_TLS_CERT / KOLO_TLS_KEY); a worker started with KOLO_TLS_CA?"};
  }
  return {FirstBytes::Kind::kGarbage, "garbage",
          (more_follow ? "at least " : "") + std::to_string(bytes.size()) +
              " bytes that are not the HTTP/2 preface of a gRPC client (first bytes " +
              Hex(bytes, 8) + ")"};
}

}  // namespace kolo::transport
