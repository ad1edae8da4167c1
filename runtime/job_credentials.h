// The job's credentials as the runtime uses them: the secret from KOLO_SECRET or
// KOLO_SECRET_FILE decoded to key bytes, the job id, and the policy for jobs without a secret
// (docs/SECURITY.md). Called by RuntimeImpl at init(). Pure functions over the file system;
// thread-safe.
#pragma once

#include <string>

#include "kolo/options.h"
#include "kolo/status.h"
#include "transport/auth/hmac_auth.h"

namespace kolo {

// Reads and decodes the secret. A secret file must be a regular file that only its owner can
// read or write (mode 0600 or 0400). Errors name the variable, never the secret's value.
StatusOr<transport::JobCredentials> LoadJobCredentials(const Options& options);

// True for 127.0.0.0/8, ::1 and "localhost".
bool IsLoopbackHost(const std::string& host);

// Without a key: OK for a job whose controller is on loopback (the caller warns), refused for
// any other unless options.insecure. `where` says why the job is multi-host.
Status CheckUnauthenticatedJob(const Options& options, const transport::JobCredentials& creds,
                               bool multi_host, const std::string& where);

}  // namespace kolo
