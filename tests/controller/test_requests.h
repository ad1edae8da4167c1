// Builders for the plain structs the controller tests feed in (TensorMeta, Request). Header-only;
// used by tests/controller/*_test.cc only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/clock.h"
#include "core/messages.h"

namespace kolo::controller::testing {

// A fixed time for tests that pass time to the plain negotiation structs.
inline const Clock::TimePoint kT0{std::chrono::seconds(1000)};

inline TensorMeta Meta(std::string name, std::vector<int64_t> shape = {4},
                       DataType dtype = DataType::kFloat32) {
  TensorMeta meta;
  meta.name = std::move(name);
  meta.shape = std::move(shape);
  meta.dtype = dtype;
  return meta;
}

inline Request Full(const TensorMeta& meta) {
  Request request;
  request.meta = meta;
  return request;
}

inline Request ById(uint32_t id) {
  Request request;
  request.cache_id = id;
  return request;
}

}  // namespace kolo::controller::testing
