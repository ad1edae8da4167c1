#include "core/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace kolo {

StatusOr<spdlog::level::level_enum> ParseLogLevel(const std::string& text) {
  if (text == "trace") return spdlog::level::trace;
  if (text == "debug") return spdlog::level::debug;
  if (text == "info") return spdlog::level::info;
  if (text == "warning" || text == "warn") return spdlog::level::warn;
  if (text == "error") return spdlog::level::err;
  if (text == "fatal" || text == "critical") return spdlog::level::critical;
  if (text == "off") return spdlog::level::off;
  return InvalidArgument(
      "'" + text + "' is not a log level (use trace, debug, info, warning, error, fatal or off)");
}

Logger MakeLogger(int rank, const std::string& module, spdlog::level::level_enum level) {
  // A sink per logger, since the pattern (with its rank and module) lives in the sink;
  // spdlog's console sinks share one process-wide mutex, so lines stay whole.
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>(module, sink);
  logger->set_pattern("[%H:%M:%S.%e] [rank " + std::to_string(rank) + "] [" + module + "] [%l] %v");
  logger->set_level(level);
  logger->flush_on(spdlog::level::warn);
  return logger;
}

}  // namespace kolo
