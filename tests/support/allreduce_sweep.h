// Helpers of the runtime tests of the allreduce's data paths (shared memory, hierarchical):
// a sweep of every dtype and op through one runtime, and the kolo segments this process maps.
// AllreduceSweep runs on a rank's thread (LocalJob::RunOnAllRanks); KoloShmMappings anywhere.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "tests/support/tensor_values.h"

namespace kolo::testing {

// Allreduces MakeInput of every dtype and op kolo reduces, `counts` elements each (odd counts
// in place, even ones out of place), and checks each result against the direct computation.
// "" when all match, else the first failure. Collective: every rank of the job calls it.
inline std::string AllreduceSweep(Runtime& rt, const std::vector<int64_t>& counts) {
  for (DataType dtype : kAllDataTypes) {
    for (ReduceOp op : kAllOps) {
      if (!HasReduceOp(dtype, op)) continue;
      for (int64_t count : counts) {
        const std::string name =
            DataTypeName(dtype) + "/" + ReduceOpName(op) + "/" + std::to_string(count);
        std::vector<uint8_t> input = MakeInput(dtype, count, rt.rank(), op);
        std::vector<uint8_t> output(input.size(), 0xAB);
        const bool in_place = count % 2 == 1;
        AllreduceOptions options;
        options.op = op;
        Status s = rt.Allreduce(name, View(input, dtype, count),
                                in_place ? View(input, dtype, count) : View(output, dtype, count),
                                options);
        if (!s.ok()) return name + ": " + s.ToString();
        std::string error = CheckAllreduce(in_place ? input : output, dtype, count, rt.size(), op);
        if (!error.empty()) return name + ": " + error;
      }
    }
  }
  return "";
}

// Lines of /proc/self/maps that map a kolo shared-memory segment.
inline int KoloShmMappings() {
  std::ifstream maps("/proc/self/maps");
  int count = 0;
  for (std::string line; std::getline(maps, line);) {
    if (line.find("/dev/shm/kolo-") != std::string::npos) ++count;
  }
  return count;
}

}  // namespace kolo::testing
