// TempDir: a fresh directory under /tmp for one test, removed with everything in it when the
// object goes out of scope (also when a REQUIRE fails). Aborts the test binary if the
// directory cannot be made. One owner; not thread-safe.
#pragma once

#include <stdlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

namespace kolo::testing {

class TempDir {
 public:
  // Makes "/tmp/<prefix>XXXXXX".
  explicit TempDir(const std::string& prefix = "kolo-test-") {
    std::string pattern = "/tmp/" + prefix + "XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror(("mkdtemp " + pattern).c_str());
      std::abort();
    }
    path_ = pattern;
  }
  ~TempDir() {
    std::error_code ignored;  // a test's leftovers must not fail the next assertion
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name.
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

}  // namespace kolo::testing
