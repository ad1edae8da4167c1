// The check init() makes that a program's kolo headers match the library it runs with. Called
// by kolo::init_for_version() and kolo_init_for_version(); a plain function, safe from any
// thread.
#pragma once

#include "kolo/status.h"

namespace kolo {

// OK when `header_version` (a KOLO_VERSION_NUMBER: major * 10000 + minor * 100 + patch) has
// this library's major and minor version; the patch may differ, since a patch release keeps
// the ABI. Otherwise kFailedPrecondition naming both versions.
Status CheckHeaderVersion(int header_version);

}  // namespace kolo
