// Near misses of the variable names kolo reads: an environment variable that is not one of
// the config table's names or aliases but is within a typo of one ("HOROVOD_FUSION_TRESHOLD",
// "kolo_timeout_seconds", "KOLO_TIMEOUT_SECOND"). The table (core/config/config_table.h) is
// the only source of names. Pure functions; safe from any thread.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kolo {

// The table's name or alias that `name` most likely meant, or "" when `name` is a name of the
// table itself or no name is close: the same letters in another case, or (ignoring case) one
// edit away (a letter added, dropped, changed, or two neighbours swapped) from a name of at
// least 8 characters, two from one of at least 14.
std::string LikelyConfigName(const std::string& name);

// One warning per variable of `env` that is a near miss, not starting with "KOLO_" (those are
// refused as unknown by Options::FromMap): "HOROVOD_FUSION_TRESHOLD is not a variable kolo
// reads; did you mean HOROVOD_FUSION_THRESHOLD? (it is ignored)". In name order.
std::vector<std::string> NearMissWarnings(const std::map<std::string, std::string>& env);

}  // namespace kolo
