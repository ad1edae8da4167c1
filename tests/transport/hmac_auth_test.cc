// Unit tests of the HMAC primitives (transport/auth/hmac_auth.h) and of the control stream's proofs
// (transport/grpc/control_auth.h). No network.
#include "transport/auth/hmac_auth.h"

#include <catch2/catch.hpp>

#include "transport/grpc/control_auth.h"

namespace kolo::transport {
namespace {

TEST_CASE("MACs are HMAC-SHA256 over length-prefixed fields", "[transport][auth]") {
  const std::string mac = Mac("key", "label", {"ab", "c"});
  CHECK(mac.size() == kMacBytes);
  CHECK(Mac("key", "label", {"ab", "c"}) == mac);            // deterministic
  CHECK(Mac("key", "label", {"a", "bc"}) != mac);            // field boundaries count
  CHECK(Mac("key", "label2", {"ab", "c"}) != mac);           // the label counts
  CHECK(Mac("kez", "label", {"ab", "c"}) != mac);            // the key counts
  CHECK(Mac("", "label", {"ab", "c"}).size() == kMacBytes);  // an empty key works
  // HMAC-SHA256("key", 8-byte length + "x"): pins the construction (computed with openssl).
  CHECK(EncodeHex(Mac("key", "x", {})) ==
        "135c25c71e50465cda9967ca22e392ae2b0619b4a9ae0138fdcf7b5692007508");
}

TEST_CASE("MACs compare by value", "[transport][auth]") {
  const std::string a = Mac("k", "l", {});
  std::string b = a;
  CHECK(MacEquals(a, b));
  b[kMacBytes - 1] ^= 1;
  CHECK_FALSE(MacEquals(a, b));
  CHECK_FALSE(MacEquals(a, a.substr(1)));
  CHECK_FALSE(MacEquals(a, ""));
}

TEST_CASE("Nonces are fresh", "[transport][auth]") {
  StatusOr<std::string> a = RandomBytes(kNonceBytes);
  StatusOr<std::string> b = RandomBytes(kNonceBytes);
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == kNonceBytes);
  CHECK(*a != *b);
}

TEST_CASE("Hex secrets decode, and errors never quote them", "[transport][auth]") {
  StatusOr<std::string> key = DecodeHex("00ff7Fa0", "KOLO_SECRET");
  REQUIRE(key.ok());
  CHECK(*key == std::string("\x00\xff\x7f\xa0", 4));
  CHECK(EncodeHex(*key) == "00ff7fa0");
  StatusOr<std::string> odd = DecodeHex("abc", "KOLO_SECRET");
  CHECK(odd.status().message() == "KOLO_SECRET must be hex digits in pairs; it has 3 characters");
  StatusOr<std::string> bad = DecodeHex("s3cr3tpassword", "KOLO_SECRET");
  CHECK(bad.status().message() == "KOLO_SECRET must be hex digits; character 1 is not one");
  CHECK(bad.status().message().find("s3cr3t") == std::string::npos);
}

TEST_CASE("Control proofs bind the role, the job, the hello and both nonces", "[transport][auth]") {
  const JobCredentials creds{"0123456789abcdef", "job-1"};
  const Hello hello{1, 3, "node-1", "10.0.0.1:4000"};
  const std::string wn(kNonceBytes, 'w');
  const std::string cn(kNonceBytes, 'c');
  const std::string worker = ControlProof(creds, ControlRole::kWorker, hello, wn, cn);
  CHECK(ControlProof(creds, ControlRole::kController, hello, wn, cn) != worker);
  CHECK(ControlProof({creds.key, "job-2"}, ControlRole::kWorker, hello, wn, cn) != worker);
  CHECK(ControlProof({"another-key-0000", creds.job_id}, ControlRole::kWorker, hello, wn, cn) !=
        worker);
  Hello other_rank = hello;
  other_rank.rank = 2;
  CHECK(ControlProof(creds, ControlRole::kWorker, other_rank, wn, cn) != worker);
  Hello other_address = hello;
  other_address.data_address = "10.0.0.9:4000";
  CHECK(ControlProof(creds, ControlRole::kWorker, other_address, wn, cn) != worker);
  CHECK(ControlProof(creds, ControlRole::kWorker, hello, wn, std::string(kNonceBytes, 'd')) !=
        worker);
}

}  // namespace
}  // namespace kolo::transport
