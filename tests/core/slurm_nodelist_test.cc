#include "core/config/slurm_nodelist.h"

#include <catch2/catch.hpp>

using Names = std::vector<std::string>;

namespace {

Names Expand(const std::string& list) {
  auto names = kolo::ExpandSlurmNodeList(list);
  REQUIRE(names.ok());
  return *names;
}

}  // namespace

TEST_CASE("SLURM node lists expand as scontrol show hostnames does", "[core][launcher]") {
  CHECK(Expand("node1") == Names{"node1"});
  CHECK(Expand("node[1-4,7]") == Names{"node1", "node2", "node3", "node4", "node7"});
  CHECK(Expand("a[01-03]") == Names{"a01", "a02", "a03"});
  CHECK(Expand("a[08-11]") == Names{"a08", "a09", "a10", "a11"});
  CHECK(Expand("n1,gpu[2-3],x") == Names{"n1", "gpu2", "gpu3", "x"});
  CHECK(Expand("r[1-2]n[03-04]") == Names{"r1n03", "r1n04", "r2n03", "r2n04"});
  CHECK(Expand("rack[0-1]-node[5]x") == Names{"rack0-node5x", "rack1-node5x"});
  CHECK(Expand("a[7],b[001-002,010]") == Names{"a7", "b001", "b002", "b010"});
  CHECK(Expand("10.0.0.[1-2]") == Names{"10.0.0.1", "10.0.0.2"});
}

TEST_CASE("The first SLURM node is found without expanding the rest", "[core][launcher]") {
  CHECK(*kolo::FirstSlurmNode("gpu[07-99],cpu1") == "gpu07");
  CHECK(*kolo::FirstSlurmNode("login,node[1-3]") == "login");
  CHECK(*kolo::FirstSlurmNode("n[1-999999]") == "n1");
}

TEST_CASE("Malformed SLURM node lists are refused with the list in the message",
          "[core][launcher]") {
  const std::string bad =
      GENERATE(as<std::string>{}, "", "node[1-4", "node1-4]", "node[]", "node[4-1]", "node[a-b]",
               "node[1,]", "a,,b", "n[[1]]", "n[1-2000000]", "n[1-1000]m[1-1000]");
  auto names = kolo::ExpandSlurmNodeList(bad);
  REQUIRE_FALSE(names.ok());
  CHECK(names.status().code() == kolo::StatusCode::kInvalidArgument);
  CHECK_THAT(names.status().message(), Catch::Contains("'" + bad + "'"));
}
