// Collectives in a process set for the tests of sets' data paths (process_set_shm_test,
// hierarchical_process_set_test): an allreduce, an uneven allgather, a broadcast, a
// reducescatter and an alltoall, each checked. Thread-safe: each call uses only its own runtime.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kolo/kolo.h"

namespace kolo::testing {

inline TensorView FloatView(std::vector<float>& v) {
  return TensorView{v.data(), DataType::kFloat32, {static_cast<int64_t>(v.size())}, Device::Cpu()};
}

// The index of the first element of `got` that is not `expected(i)`, or -1.
template <typename Expected>
int64_t FirstWrong(const std::vector<float>& got, Expected expected) {
  for (size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected(i)) return static_cast<int64_t>(i);
  }
  return -1;
}

// Within the current set (`members`, ascending job ranks): an allreduce past one slot, an
// uneven allgather, a broadcast from the set's last member, a reducescatter and an uneven
// alltoall, each checked
// element by element (values differ along each buffer, so a block put in the wrong place
// shows); "" or the first wrong result (going on after it, so that the other members are not
// left waiting). `tag` names the ops ("set/allreduce" + tag, ...).
inline std::string RunSetOps(Runtime& rt, const std::vector<int>& members,
                             const std::string& tag = "") {
  std::string first_failure;
  auto fail = [&first_failure](const std::string& text) {
    if (first_failure.empty()) first_failure = text;
  };
  auto check = [&fail](const std::string& op, const Status& s, int64_t wrong) {
    if (!s.ok()) fail(op + ": " + s.ToString());
    if (s.ok() && wrong >= 0) fail(op + ": wrong element " + std::to_string(wrong));
  };
  const int n = static_cast<int>(members.size());
  const int me =
      static_cast<int>(std::find(members.begin(), members.end(), rt.rank()) - members.begin());
  const float triangle = static_cast<float>(n * (n + 1) / 2);
  // Allreduce: 300,007 floats (1.2 MiB, past a slot); member i's element k is i + 1 + k % 1000.
  std::vector<float> sum(300007);
  for (size_t k = 0; k < sum.size(); ++k) sum[k] = static_cast<float>(me + 1 + k % 1000);
  Status s = rt.Allreduce("set/allreduce" + tag, FloatView(sum), FloatView(sum));
  check("allreduce", s, FirstWrong(sum, [&](size_t k) {
          return triangle + static_cast<float>(n * static_cast<int>(k % 1000));
        }));
  // Allgather: member i sends i + 2 rows of 3 floats holding its job rank.
  std::vector<float> rows(static_cast<size_t>((me + 2) * 3), static_cast<float>(rt.rank()));
  std::vector<float> gathered, expected;
  for (size_t i = 0; i < members.size(); ++i) {
    expected.insert(expected.end(), (i + 2) * 3, static_cast<float>(members[i]));
  }
  s = rt.Allgather("set/allgather" + tag,
                   {rows.data(), DataType::kFloat32, {me + 2, 3}, Device::Cpu()},
                   [&gathered](const std::vector<int64_t>& shape) -> void* {
                     gathered.resize(static_cast<size_t>(shape[0] * shape[1]));
                     return gathered.data();
                   });
  check("allgather", s,
        gathered.size() != expected.size() ? 0 : FirstWrong(gathered, [&expected](size_t k) {
          return expected[k];
        }));
  // Broadcast from the set's last member (a job rank): element k is k % 1000 there.
  std::vector<float> shared(70001, -1.0f);
  if (rt.rank() == members.back()) {
    for (size_t k = 0; k < shared.size(); ++k) shared[k] = static_cast<float>(k % 1000);
  }
  s = rt.Broadcast("set/broadcast" + tag, FloatView(shared), members.back());
  check("broadcast", s, FirstWrong(shared, [](size_t k) { return static_cast<float>(k % 1000); }));
  // Reducescatter of n * 1001 rows, member i's row k i + 1 + k: each member gets its 1001 rows
  // of the sum.
  std::vector<float> input(static_cast<size_t>(n) * 1001);
  for (size_t k = 0; k < input.size(); ++k) input[k] = static_cast<float>(me + 1 + k);
  std::vector<float> part(1001, -1.0f);
  s = rt.Reducescatter("set/reducescatter" + tag, FloatView(input), FloatView(part));
  check("reducescatter", s, FirstWrong(part, [&](size_t k) {
          return triangle + static_cast<float>(n * (me * 1001 + static_cast<int>(k)));
        }));
  // Alltoall: member i sends member j (i + j) % 3 + 1 rows of 2 floats, element k of them
  // 1000 i + 10 j + k.
  std::vector<int64_t> splits;
  std::vector<float> rows_out;
  for (int j = 0; j < n; ++j) {
    splits.push_back((me + j) % 3 + 1);
    for (int64_t k = 0; k < splits.back() * 2; ++k) {
      rows_out.push_back(static_cast<float>(1000 * me + 10 * j + k));
    }
  }
  std::vector<float> rows_in, want;
  for (int i = 0; i < n; ++i) {
    for (int64_t k = 0; k < ((i + me) % 3 + 1) * 2; ++k) {
      want.push_back(static_cast<float>(1000 * i + 10 * me + k));
    }
  }
  s = rt.Alltoall("set/alltoall" + tag,
                  {rows_out.data(),
                   DataType::kFloat32,
                   {static_cast<int64_t>(rows_out.size() / 2), 2},
                   Device::Cpu()},
                  splits, [&rows_in](const std::vector<int64_t>& shape) -> void* {
                    rows_in.resize(static_cast<size_t>(shape[0] * shape[1]));
                    return rows_in.data();
                  });
  check("alltoall", s, rows_in.size() != want.size() ? 0 : FirstWrong(rows_in, [&want](size_t k) {
          return want[k];
        }));
  return first_failure;
}

// Adds `members` on every rank (a collective of the job) and runs RunSetOps on its members.
inline std::string AddAndRun(Runtime& rt, const std::vector<int>& members, int* id) {
  StatusOr<int> added = rt.AddProcessSet(members);
  if (!added.ok()) return "add_process_set: " + added.status().ToString();
  *id = *added;
  if (std::find(members.begin(), members.end(), rt.rank()) == members.end()) return "";
  ProcessSetScope scope(*id);
  return RunSetOps(rt, members);
}

}  // namespace kolo::testing
