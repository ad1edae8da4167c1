// The NCCL version check and NCCL's environment defaults: pure functions, tested in every build
// (with or without NCCL).
#include "ops/nccl/nccl_version.h"

#include <catch2/catch.hpp>

#include "ops/nccl/nccl_environment.h"

using namespace kolo;
using namespace kolo::gpu;

TEST_CASE("NCCL version codes read as NCCL writes them, in both encodings", "[nccl]") {
  CHECK(NcclVersionText(22809) == "2.28.9");
  CHECK(NcclVersionText(21903) == "2.19.3");
  CHECK(NcclVersionText(20900) == "2.9.0");
  CHECK(NcclVersionText(2804) == "2.8.4");  // NCCL <= 2.8: X*1000 + Y*100 + Z
  CHECK(NcclVersionText(30001) == "3.0.1");
  const NcclVersion v = DecodeNcclVersion(22809);
  CHECK(v.major == 2);
  CHECK(v.minor == 28);
  CHECK(v.patch == 9);
}

TEST_CASE("NCCL at run time may be the build's or newer, never older", "[nccl]") {
  CHECK(CheckNcclRunTimeVersion(22809, 22809).ok());
  CHECK(CheckNcclRunTimeVersion(22809, 22810).ok());
  CHECK(CheckNcclRunTimeVersion(22809, 30000).ok());
  CHECK(CheckNcclRunTimeVersion(2804, 20900).ok());  // across the change of encoding

  const Status older = CheckNcclRunTimeVersion(22809, 22703);
  CHECK(older.code() == StatusCode::kFailedPrecondition);
  CHECK_THAT(older.message(),
             Catch::StartsWith("NCCL at run time (2.27.3, the libnccl.so.2 the loader found) is "
                               "older than the one kolo was built with (2.28.9)"));
  CHECK_THAT(older.message(), Catch::Contains("LD_LIBRARY_PATH"));
  CHECK_FALSE(CheckNcclRunTimeVersion(22809, 22808).ok());  // a patch older is older
  CHECK_FALSE(CheckNcclRunTimeVersion(20900, 2804).ok());
}

TEST_CASE("NCCL's sockets are pinned to kolo's interface, exactly", "[nccl]") {
  const std::vector<NcclEnvDefault> defaults = NcclEnvironmentDefaults("eth0");
  REQUIRE(defaults.size() == 1);
  CHECK(defaults[0].name == "NCCL_SOCKET_IFNAME");
  CHECK(defaults[0].value == "=eth0");  // "=": exactly eth0, not every name starting eth0
  CHECK_THAT(defaults[0].why, Catch::Contains("eth0"));

  CHECK(NcclEnvironmentDefaults("").empty());
  // Names NCCL would read as a list or an exclusion are left to NCCL's own choice.
  CHECK(NcclEnvironmentDefaults("eth0,eth1").empty());
  CHECK(NcclEnvironmentDefaults("^docker").empty());
  CHECK(NcclEnvironmentDefaults("=eth0").empty());
}
