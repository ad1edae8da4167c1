// Reading kolorun's prefixed output in the tools' tests ("[2] KOLO_RANK=2").
#pragma once

#include <map>
#include <string>

#include "tests/support/child_process.h"

namespace kolo::testing {

// The NAME=value pairs on the lines of rank `rank` in kolorun's output.
inline std::map<std::string, std::string> VariablesOfRank(const std::string& out, int rank) {
  std::map<std::string, std::string> vars;
  const std::string prefix = "[" + std::to_string(rank) + "] ";
  for (const std::string& line : SplitLines(out)) {
    if (line.rfind(prefix, 0) != 0) continue;
    const std::string rest = line.substr(prefix.size());
    const size_t eq = rest.find('=');
    if (eq != std::string::npos) vars[rest.substr(0, eq)] = rest.substr(eq + 1);
  }
  return vars;
}

}  // namespace kolo::testing
