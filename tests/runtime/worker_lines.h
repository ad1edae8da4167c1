// What the runtime tests' worker processes (fault_worker, relay_job_worker) share: a float
// vector as a CPU tensor, and a line printed to stdout at once, for the test that reads it.
// Threading: any thread.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::test {

inline kolo::TensorView View(std::vector<float>& data) {
  return kolo::TensorView{data.data(),
                          kolo::DataType::kFloat32,
                          {static_cast<int64_t>(data.size())},
                          kolo::Device::Cpu()};
}

inline void Print(const std::string& line) {
  std::printf("%s\n", line.c_str());
  std::fflush(stdout);
}

}  // namespace kolo::test
