// Reading KOLO_SECRET_FILE with its safety checks, shared by the runtime (init) and kolorun
// (which passes the user's secret file on to its ranks instead of making a secret). Pure
// function over the file system; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo {

// The text of the secret file at `path` without trailing newlines or spaces. It must be a
// regular file of at most 4096 bytes, owned by this user, that group and others cannot access
// (mode 0600 or 0400). Every failure, a missing file included, is InvalidArgument naming the
// variable and the path, never the content.
StatusOr<std::string> ReadSecretFile(const std::string& path);

}  // namespace kolo
