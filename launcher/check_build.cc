// kolorun -cb and -v; see check_build.h.
#include "launcher/check_build.h"

#include <glob.h>
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>

#include <vector>

#include "kolo/version.h"

#ifndef KOLORUN_HAVE_NCCL
#define KOLORUN_HAVE_NCCL 0
#endif

namespace kolo::launcher {
namespace {

// The first file matching one of `patterns`, or "".
std::string FirstMatch(const std::vector<std::string>& patterns) {
  for (const std::string& pattern : patterns) {
    glob_t found{};
    const bool any = glob(pattern.c_str(), 0, nullptr, &found) == 0 && found.gl_pathc > 0;
    std::string first = any ? found.gl_pathv[0] : "";
    globfree(&found);
    if (any) return first;
  }
  return "";
}

// kolo's extension module `file_glob` (e.g. "_C*.so") of package kolo/`package`: in the build
// tree beside bin/ (python/kolo/...) or in an installation's site-packages beside bin/.
std::string FindExtension(const std::string& bin_dir, const std::string& package,
                          const std::string& file_glob) {
  const std::string tail = "/kolo/" + package + "/" + file_glob;
  return FirstMatch({bin_dir + "/../python" + tail,
                     bin_dir + "/../lib*/python3*/site-packages" + tail,
                     bin_dir + "/../lib*/python3*/dist-packages" + tail});
}

std::string Line(bool present, const std::string& name, const std::string& detail) {
  std::string line = std::string("    [") + (present ? "X" : " ") + "] " + name;
  if (!detail.empty()) line += std::string(name.size() < 15 ? 15 - name.size() : 1, ' ') + detail;
  return line + "\n";
}

}  // namespace

std::string ThisExecutable() {
  char path[PATH_MAX] = {0};
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  return n > 0 ? std::string(path, static_cast<size_t>(n)) : "";
}

BuildInfo DetectBuild(const std::string& executable) {
  BuildInfo info;
  info.version = KOLO_VERSION_STRING;
  info.nccl = KOLORUN_HAVE_NCCL != 0;
  const size_t slash = executable.rfind('/');
  const std::string bin_dir = slash == std::string::npos ? "." : executable.substr(0, slash);
  char real[PATH_MAX] = {0};
  std::string found = FindExtension(bin_dir, "torch", "_C*.so");
  if (!found.empty() && realpath(found.c_str(), real) != nullptr) found = real;
  info.torch_module = found;
  found = FindExtension(bin_dir, "tensorflow", "_kolo_ops*.so");
  if (!found.empty() && realpath(found.c_str(), real) != nullptr) found = real;
  info.tensorflow_module = found;
  return info;
}

std::string FormatCheckBuild(const BuildInfo& info) {
  auto framework = [](const std::string& module, const char* package) {
    return module.empty() ? std::string("not built (no ") + package + " next to this kolorun)"
                          : std::string(package) + ": " + module;
  };
  std::string out = "kolo v" + info.version + ":\n\nAvailable Frameworks:\n";
  out += Line(!info.tensorflow_module.empty(), "TensorFlow",
              framework(info.tensorflow_module, "kolo.tensorflow"));
  out += Line(!info.torch_module.empty(), "PyTorch", framework(info.torch_module, "kolo.torch"));
  out += Line(false, "MXNet", "kolo has no MXNet binding");
  out += "\nAvailable Controllers:\n";
  out += Line(false, "MPI", "no: kolo has no MPI controller (kolo programs run under mpirun too)");
  out += Line(false, "Gloo", "no: kolo's own controller runs horovodrun --gloo jobs");
  out += Line(true, "gRPC", "kolo's controller, on rank 0, over TCP");
  out += "\nAvailable Tensor Operations:\n";
  out += Line(info.nccl, "NCCL", info.nccl ? "GPU tensors" : "not built");
  out += Line(false, "DDL", "");
  out += Line(false, "CCL", "");
  out += Line(false, "MPI", "");
  out += Line(false, "Gloo", "no: kolo's TCP ring and shared memory do its part");
  out += Line(true, "TCP ring", "CPU tensors between hosts (KOLO_TRANSPORT=tcp)");
  out += Line(true, "Shared memory", "CPU tensors within a host (KOLO_TRANSPORT=shm)");
  return out;
}

}  // namespace kolo::launcher
