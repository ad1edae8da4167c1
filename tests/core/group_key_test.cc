// A group's key (core/group_validation.h): the members' names joined so that a member's place can
// be read back whatever its name holds, and different memberships never share a key.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/group_validation.h"
#include "core/loop/op_cache.h"

using namespace kolo;

TEST_CASE("A group key gives every member back its place", "[core][group]") {
  const std::vector<std::vector<std::string>> groups = {
      {"g/a", "g/b", "g/c"}, {"a,b", "c"}, {"a", "b,c"}, {"x\\", ",", ""}, {"\\,", "\\"}, {"one"}};
  for (const auto& names : groups) {
    const std::string key = GroupKey(names);
    INFO("key " << key);
    for (size_t i = 0; i < names.size(); ++i) {
      CHECK(GroupMemberIndex(key, names[i]) == static_cast<int>(i));
    }
    CHECK(GroupMemberIndex(key, "not a member") == -1);
  }
  CHECK(GroupKey({"g/a", "g/b"}) == "g/a,g/b");  // names without commas read as before
  CHECK(GroupKey({"a,b", "c"}) != GroupKey({"a", "b,c"}));
  CHECK(GroupKey({"a\\", "b"}) != GroupKey({"a\\,b"}));
}

TEST_CASE("A member's place in a process set's group key, whose names carry the set's suffix",
          "[core][group]") {
  const std::string suffix = " [process set 3]";
  const std::string key = GroupKey({"w,0", "w,1"}) + suffix;
  CHECK(GroupIndex(key, "w,0" + suffix) == 0);
  CHECK(GroupIndex(key, "w,1" + suffix) == 1);
  CHECK(GroupIndex(GroupKey({"a", "b"}), "b") == 1);
}
