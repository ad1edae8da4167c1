// kolo::version() and the version check of init(): headers of another major.minor version are
// refused with a message naming both versions, before anything else is looked at.
#include <catch2/catch.hpp>
#include <string>

#include "kolo/kolo.h"

namespace {

int VersionNumber(int major, int minor, int patch) {
  return major * 10000 + minor * 100 + patch;
}

}  // namespace

TEST_CASE("the library's version is the version of its headers", "[runtime][version]") {
  CHECK(std::string(kolo::version()) == KOLO_VERSION_STRING);
  CHECK(KOLO_VERSION_NUMBER ==
        VersionNumber(KOLO_VERSION_MAJOR, KOLO_VERSION_MINOR, KOLO_VERSION_PATCH));
  CHECK(std::string(KOLO_VERSION_STRING) == std::to_string(KOLO_VERSION_MAJOR) + "." +
                                                std::to_string(KOLO_VERSION_MINOR) + "." +
                                                std::to_string(KOLO_VERSION_PATCH));
}

TEST_CASE("init refuses headers of another major or minor version", "[runtime][version]") {
  const int other = GENERATE(VersionNumber(KOLO_VERSION_MAJOR, KOLO_VERSION_MINOR + 1, 0),
                             VersionNumber(KOLO_VERSION_MAJOR + 1, KOLO_VERSION_MINOR, 0), -1);
  // Options that init could otherwise use: only the version check can fail.
  kolo::Options options;
  const kolo::Status s = kolo::init_for_version(other, options);
  CHECK(s.code() == kolo::StatusCode::kFailedPrecondition);
  CHECK_THAT(s.message(), Catch::Contains(std::string("library of kolo ") + KOLO_VERSION_STRING));
  CHECK_THAT(s.message(), Catch::Contains("major.minor must match"));
  CHECK_FALSE(kolo::is_initialized());
}

TEST_CASE("init accepts headers that differ in the patch version only", "[runtime][version]") {
  kolo::Options options;  // one rank: no controller, no peers
  const int patch = KOLO_VERSION_PATCH == 0 ? 1 : 0;
  const kolo::Status s =
      kolo::init_for_version(VersionNumber(KOLO_VERSION_MAJOR, KOLO_VERSION_MINOR, patch), options);
  REQUIRE(s.ok());
  CHECK(kolo::is_initialized());
  CHECK(kolo::shutdown().ok());
}
