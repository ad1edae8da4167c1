// Logging: one spdlog logger per (rank, module), printing "[rank N] [module]" so interleaved
// output from several ranks (or several in-process runtimes) stays readable. Every logger writes
// to stderr; spdlog's console mutex keeps lines whole. Log calls with arguments are formatted only
// when their level is enabled. Thread-safe.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

#include "kolo/status.h"

namespace kolo {

using Logger = std::shared_ptr<spdlog::logger>;

// Parses KOLO_LOG_LEVEL's values: trace, debug, info, warning (or warn), error, fatal
// (Horovod's name; also critical), off.
StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& text);

// A logger for `module` of `rank` at `level`. Not registered in spdlog's global registry,
// so runtimes in one process do not share or overwrite each other's loggers.
Logger MakeLogger(int rank, const std::string& module, spdlog::level::level_enum level);

}  // namespace kolo
