// Testbed: the multi-host testbed of tools/testbed/testbed (H network-namespace hosts on a
// tc-shaped bridge) as the tools' tests use it. The constructor brings one up, owned by this
// test process, so a testbed of a killed test is deleted by the next `up` or `down`; the
// destructor takes it down. Where this machine cannot make namespaces (not root), the
// constructor ends the test binary as skipped (kSkipCode, SKIP_RETURN_CODE in CMakeLists.txt).
// The test target defines TESTBED_PATH, KOLORUN_PATH and KOLO_BENCH_PATH.
//
// Threading: one owner thread.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <regex>
#include <string>
#include <vector>

#include "tests/support/child_process.h"

namespace kolo::testing {

constexpr int kSkipCode = 77;  // SKIP_RETURN_CODE in CMakeLists.txt

// Ends the test binary as skipped when `up` said this machine cannot make namespaces (its exit
// code 3: not root, no CAP_NET_ADMIN).
inline void SkipIfNoNamespaces(const ProcessResult& up) {
  if (up.exit_code != 3) return;
  std::fprintf(stderr, "SKIP: %s", up.err.c_str());
  std::fflush(stderr);
  std::_Exit(kSkipCode);
}

class Testbed {
 public:
  // `hosts` x `ranks` on links of `rate` and `delay` (tc words: "200mbit", "1ms"; "0" for none).
  Testbed(const std::string& name, int hosts, int ranks, const std::string& rate,
          const std::string& delay)
      : name_(name + std::to_string(getpid())) {
    ProcessResult up =
        RunProcess({TESTBED_PATH, "up", "--name", name_, "--owner", std::to_string(getpid()),
                    "--hosts", std::to_string(hosts), "--ranks-per-host", std::to_string(ranks),
                    "--rate", rate, "--delay", delay});
    SkipIfNoNamespaces(up);
    up_error_ = up.exit_code == 0 ? "" : "testbed up: " + up.out + up.err;
    shaping_ = up.err;
  }
  ~Testbed() { Down(); }
  Testbed(const Testbed&) = delete;
  Testbed& operator=(const Testbed&) = delete;

  // The testbed's --name (for `testbed run --name ...`, `testbed hosts --name ...`).
  const std::string& name() const { return name_; }
  // Empty when `up` succeeded, else its output.
  const std::string& up_error() const { return up_error_; }
  // `up`'s line saying how the links are shaped.
  const std::string& shaping() const { return shaping_; }
  // The namespace of host `i` (the name kolorun's -H and Open MPI's -H give it).
  std::string Host(int i) const {
    return "kolo-tb-" + name_ + "-" + std::to_string(getpid()) + "-h" + std::to_string(i);
  }
  // Host i's address on the testbed's subnet.
  static std::string Address(int i) { return "10.201.0." + std::to_string(i + 1); }

  // A kolo job through kolorun (`testbed run`): `flags` for kolorun, then kolo-bench's `args`.
  ProcessResult RunBench(const std::vector<std::string>& flags,
                         const std::vector<std::string>& args,
                         const std::vector<std::string>& env = {}) const {
    std::vector<std::string> argv = {TESTBED_PATH, "run", "--name", name_};
    argv.insert(argv.end(), flags.begin(), flags.end());
    argv.push_back("--");
    argv.push_back(KOLO_BENCH_PATH);
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> all_env = {std::string("KOLORUN=") + KOLORUN_PATH};
    all_env.insert(all_env.end(), env.begin(), env.end());
    return RunProcess(argv, all_env);
  }

  // An Open MPI job (`testbed mpirun`) of `program`.
  ProcessResult MpiRun(const std::vector<std::string>& program) const {
    std::vector<std::string> argv = {TESTBED_PATH, "mpirun", "--name", name_, "--"};
    argv.insert(argv.end(), program.begin(), program.end());
    return RunProcess(argv);
  }

  // Deletes the testbed (again: a no-op); returns `down`'s result.
  ProcessResult Down() const { return RunProcess({TESTBED_PATH, "down", "--name", name_}); }

  // The namespaces of this testbed that exist now.
  std::vector<std::string> Namespaces() const { return NamespacesOf(name_); }

  // The namespaces of testbed `name` that exist now.
  static std::vector<std::string> NamespacesOf(const std::string& name) {
    std::vector<std::string> ours;
    const std::string prefix = "kolo-tb-" + name + "-";
    for (const std::string& line : SplitLines(RunProcess({"ip", "netns", "list"}).out)) {
      if (line.rfind(prefix, 0) == 0) ours.push_back(line.substr(0, line.find(' ')));
    }
    return ours;
  }

 private:
  std::string name_;
  std::string up_error_;
  std::string shaping_;
};

// The allreduce bus bandwidth (GB/s) over `n` parties (ranks, or hosts) on the last result
// row of kolo-bench's table as kolorun prints it, computed from the exact size and time columns
// (the printed busbw has two decimals, too coarse for a slow link): bytes / time · 2(n−1)/n.
// -1 without a row.
inline double LastBusBandwidth(const std::string& out, int n) {
  static const std::regex row(
      R"(\[0\] +(\d+) +\d+ +\w+ +\w+ +-?\d+ +([\d.]+) +[\d.]+ +[\d.]+ +\S+)");
  double busbw = -1;
  for (const std::string& line : SplitLines(out)) {
    std::smatch m;
    if (!std::regex_match(line, m, row)) continue;
    double bytes = std::stod(m[1]), time_us = std::stod(m[2]);
    if (time_us > 0) busbw = bytes / time_us / 1e3 * 2.0 * (n - 1) / n;
  }
  return busbw;
}

}  // namespace kolo::testing
