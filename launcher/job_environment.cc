// Job secret, free port and per-rank environment for kolorun; see job_environment.h.
#include "launcher/job_environment.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <set>

#include "core/config/secret_file.h"
#include "core/free_port.h"

namespace kolo::launcher {
namespace {

Status ErrnoStatus(const std::string& what) {
  return Unavailable(what + ": " + std::strerror(errno));
}

// Reads exactly `size` bytes from `fd`, retrying short reads and EINTR.
Status ReadFully(int fd, unsigned char* data, size_t size) {
  size_t done = 0;
  while (done < size) {
    ssize_t n = read(fd, data + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus("cannot read /dev/urandom");
    if (n == 0) return Unavailable("cannot read /dev/urandom: unexpected end of file");
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

StatusOr<std::string> MakeJobSecret() {
  unsigned char bytes[32];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus("cannot open /dev/urandom");
  Status read_status = ReadFully(fd, bytes, sizeof(bytes));
  close(fd);
  if (!read_status.ok()) return read_status;
  static const char kHex[] = "0123456789abcdef";
  std::string secret;
  secret.reserve(2 * sizeof(bytes));
  for (unsigned char b : bytes) {
    secret.push_back(kHex[b >> 4]);
    secret.push_back(kHex[b & 0xf]);
  }
  return secret;
}

StatusOr<int> FindFreePort() {
  return PickControllerPort();
}

StatusOr<JobLayout> PrepareJob(int size) {
  JobLayout job;
  job.size = size;
  KOLO_ASSIGN_OR_RETURN(int port, FindFreePort());
  job.controller_port = port;
  for (int tries = 0; tries < 16 && (job.store_port == 0 || job.store_port == port); ++tries) {
    KOLO_ASSIGN_OR_RETURN(job.store_port, FindFreePort());
  }
  KOLO_ASSIGN_OR_RETURN(std::string secret, MakeJobSecret());
  job.secret = std::move(secret);
  KOLO_ASSIGN_OR_RETURN(std::string id, MakeJobSecret());
  job.job_id = "kolorun-" + id.substr(0, 16);
  return job;
}

Status UseUserSecretFile(std::vector<std::string>* base_env, JobLayout* job) {
  const std::string prefix = "KOLO_SECRET_FILE=";
  std::string path;
  std::vector<std::string> kept;
  for (std::string& entry : *base_env) {
    if (entry.compare(0, prefix.size(), prefix) == 0) {
      path = entry.substr(prefix.size());
    } else {
      kept.push_back(std::move(entry));
    }
  }
  *base_env = std::move(kept);
  if (path.empty()) return Status::Ok();
  const std::string fix = "; fix it, or unset KOLO_SECRET_FILE and kolorun makes a secret";
  StatusOr<std::string> secret = ReadSecretFile(path);
  if (!secret.ok()) return InvalidArgument(secret.status().message() + fix);
  const bool hex = secret->find_first_not_of("0123456789abcdefABCDEF") == std::string::npos;
  if (!hex || secret->size() % 2 != 0 || secret->size() < 32) {
    return InvalidArgument("KOLO_SECRET_FILE='" + path +
                           "' does not hold a secret of at least 32 hex digits" + fix);
  }
  job->secret = std::move(secret).value();
  return Status::Ok();
}

std::vector<EnvVar> RankVariables(const RankIdentity& who, const JobLayout& job) {
  std::vector<EnvVar> vars = {
      {"KOLO_RANK", std::to_string(who.rank)},
      {"KOLO_SIZE", std::to_string(job.size)},
      {"KOLO_LOCAL_RANK", std::to_string(who.local_rank)},
      {"KOLO_LOCAL_SIZE", std::to_string(who.local_size)},
      {"KOLO_CONTROLLER", job.controller_host + ":" + std::to_string(job.controller_port)},
      {"KOLO_JOB_ID", job.job_id},
  };
  if (!who.hostname.empty()) vars.emplace_back("KOLO_HOSTNAME", who.hostname);
  if (!job.start_timeout_seconds.empty()) {
    vars.emplace_back("KOLO_START_TIMEOUT_SECONDS", job.start_timeout_seconds);
  }
  const std::vector<EnvVar> horovod = {
      {"HOROVOD_HOSTNAME", who.host},
      {"HOROVOD_RANK", std::to_string(who.rank)},
      {"HOROVOD_SIZE", std::to_string(job.size)},
      {"HOROVOD_LOCAL_RANK", std::to_string(who.local_rank)},
      {"HOROVOD_LOCAL_SIZE", std::to_string(who.local_size)},
      {"HOROVOD_CROSS_RANK", std::to_string(who.cross_rank)},
      {"HOROVOD_CROSS_SIZE", std::to_string(who.cross_size)},
  };
  vars.insert(vars.end(), horovod.begin(), horovod.end());
  const std::vector<EnvVar> torchrun = {
      {"RANK", std::to_string(who.rank)},
      {"WORLD_SIZE", std::to_string(job.size)},
      {"LOCAL_RANK", std::to_string(who.local_rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(who.local_size)},
      {"MASTER_ADDR", job.controller_host},
  };
  vars.insert(vars.end(), torchrun.begin(), torchrun.end());
  if (job.store_port > 0) vars.emplace_back("MASTER_PORT", std::to_string(job.store_port));
  return vars;
}

std::vector<std::string> MergeEnvironment(const std::vector<std::string>& base,
                                          const std::vector<EnvVar>& vars) {
  std::set<std::string> names;
  for (const auto& [name, value] : vars) names.insert(name);
  std::vector<std::string> env;
  env.reserve(base.size() + vars.size());
  for (const std::string& entry : base) {
    if (names.count(entry.substr(0, entry.find('='))) == 0) env.push_back(entry);
  }
  for (const auto& [name, value] : vars) env.push_back(name + "=" + value);
  return env;
}

std::vector<std::string> RankEnvironment(const std::vector<std::string>& base, int rank,
                                         const JobLayout& job) {
  RankIdentity who;
  who.rank = rank;
  who.local_rank = rank;
  who.local_size = job.size;
  std::vector<EnvVar> vars = RankVariables(who, job);
  vars.emplace_back("KOLO_SECRET", job.secret);
  return MergeEnvironment(base, vars);
}

}  // namespace kolo::launcher
