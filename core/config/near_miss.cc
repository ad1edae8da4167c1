#include "core/config/near_miss.h"

#include <algorithm>
#include <cctype>

#include "core/config/config_table.h"
#include "core/config/horovod_env.h"

namespace kolo {
namespace {

std::string Upper(const std::string& text) {
  std::string out = text;
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

// Optimal string alignment distance (edits: insert, delete, substitute, swap neighbours),
// giving up with limit + 1 once the answer is known to exceed `limit`.
size_t EditDistance(const std::string& a, const std::string& b, size_t limit) {
  const size_t n = a.size();
  const size_t m = b.size();
  if ((n > m ? n - m : m - n) > limit) return limit + 1;
  std::vector<std::vector<size_t>> d(n + 1, std::vector<size_t>(m + 1));
  for (size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (size_t i = 1; i <= n; ++i) {
    size_t row_min = d[i][0];
    for (size_t j = 1; j <= m; ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
      row_min = std::min(row_min, d[i][j]);
    }
    if (row_min > limit) return limit + 1;
  }
  return d[n][m];
}

size_t AllowedEdits(const std::string& known) {
  if (known.size() >= 14) return 2;
  return known.size() >= 8 ? 1 : 0;
}

}  // namespace

std::string LikelyConfigName(const std::string& name) {
  const std::string upper = Upper(name);
  std::string best;
  size_t best_distance = 0;
  for (const ConfigVar& var : ConfigTable()) {
    std::vector<const char*> names = {var.name};
    names.insert(names.end(), var.aliases.begin(), var.aliases.end());
    for (const char* known : names) {
      if (name == known) return "";  // a name of the table: no miss
      const size_t allowed = AllowedEdits(known);
      const size_t distance = EditDistance(upper, known, allowed);
      if (distance > allowed) continue;
      if (best.empty() || distance < best_distance) {
        best = known;
        best_distance = distance;
      }
    }
  }
  return best;
}

std::vector<std::string> NearMissWarnings(const std::map<std::string, std::string>& env) {
  std::vector<std::string> warnings;
  for (const auto& entry : env) {
    const std::string& name = entry.first;
    if (name.rfind("KOLO_", 0) == 0 || IsHandledHorovodVariable(name)) continue;
    const std::string likely = LikelyConfigName(name);
    if (likely.empty()) continue;
    warnings.push_back(name + " is not a variable kolo reads; did you mean " + likely +
                       "? (it is ignored)");
  }
  return warnings;
}

}  // namespace kolo
