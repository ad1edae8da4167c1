// Unit tests of the first-bytes classifier of the controller's front door
// (transport/grpc/first_bytes.h). No network.
#include "transport/grpc/first_bytes.h"

#include <catch2/catch.hpp>
#include <string>

namespace kolo::transport {
namespace {

using Kind = FirstBytes::Kind;

TEST_CASE("The HTTP/2 preface, whole or in part, is a gRPC client", "[transport][front-door]") {
  const std::string preface(kHttp2Preface);
  CHECK(ClassifyFirstBytes(preface, false).kind == Kind::kPreface);
  // What a client sends right after the preface (its SETTINGS) does not matter.
  CHECK(ClassifyFirstBytes(preface + std::string("\0\0\0\x04", 4), false).kind == Kind::kPreface);
  for (size_t n = 1; n < preface.size(); ++n) {
    INFO(n << " bytes");
    CHECK(ClassifyFirstBytes(preface.substr(0, n), false).kind == Kind::kPartialPreface);
  }
  // One byte off is refused (it reads as an HTTP/1 request line "PRI * ...").
  std::string off = preface;
  off[20] = 'X';
  CHECK(ClassifyFirstBytes(off, false).kind == Kind::kHttp1);
}

TEST_CASE("HTTP/1, TLS and other bytes are named for the log", "[transport][front-door]") {
  const FirstBytes get = ClassifyFirstBytes("GET /metrics HTTP/1.1\r\n", false);
  CHECK(get.kind == Kind::kHttp1);
  CHECK(get.key == "http1");
  CHECK(get.reason.find("an HTTP/1 request (GET /metrics), not gRPC") == 0);
  // "PRI" starts like the preface but goes on differently: an HTTP/1 request line.
  CHECK(ClassifyFirstBytes("PRIX / HTTP/1.1\r\n", false).kind == Kind::kHttp1);
  // Bytes that are not printable are never quoted as they are.
  const FirstBytes odd = ClassifyFirstBytes(std::string("POST /\x01\x7f\n", 9), false);
  CHECK(odd.reason.find("(POST /?"
                        "?)") != std::string::npos);

  const FirstBytes tls = ClassifyFirstBytes(std::string("\x16\x03\x01\x02\x00", 5), false);
  CHECK(tls.kind == Kind::kTls);
  CHECK(tls.reason.find("serves plaintext") != std::string::npos);

  const FirstBytes garbage = ClassifyFirstBytes(std::string(40, '\x07'), false);
  CHECK(garbage.kind == Kind::kGarbage);
  CHECK(garbage.reason ==
        "40 bytes that are not the HTTP/2 preface of a gRPC client (first bytes 07 07 07 07 07 07 "
        "07 07)");
  CHECK(ClassifyFirstBytes(std::string(64, 'x'), true).reason.find("at least 64 bytes") == 0);
  // Lower case is not a method.
  CHECK(ClassifyFirstBytes("get / HTTP/1.1\r\n", false).kind == Kind::kGarbage);
}

}  // namespace
}  // namespace kolo::transport
