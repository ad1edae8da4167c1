// CheckBuild: `kolorun -cb` (horovodrun's --check-build): which frameworks, controllers and
// tensor-operation backends this kolo build has, in the layout horovodrun prints, and
// `kolorun -v`'s version. The frameworks are the kolo.torch and kolo.tensorflow extensions
// found next to this kolorun (a build tree's python/ folder or an installation's
// site-packages). Called by kolorun's main(); reads the file system, no state.
#pragma once

#include <string>

namespace kolo::launcher {

struct BuildInfo {
  std::string version;            // kolo's, "0.2.0"
  std::string torch_module;       // kolo.torch's extension found; empty: none
  std::string tensorflow_module;  // kolo.tensorflow's; empty: none
  bool nccl = false;              // built with NCCL (KOLO_HAVE_NCCL)
};

// The path of the running executable (/proc/self/exe), or "" where it cannot be read.
std::string ThisExecutable();

// What the build next to `executable` (kolorun's path) has.
BuildInfo DetectBuild(const std::string& executable);

// The -cb text.
std::string FormatCheckBuild(const BuildInfo& info);

}  // namespace kolo::launcher
