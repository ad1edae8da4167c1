#include "ops/nccl/nccl_version.h"

#include <tuple>

namespace kolo::gpu {

NcclVersion DecodeNcclVersion(int code) {
  NcclVersion v;
  const int major_unit = code >= 10000 ? 10000 : 1000;  // 2.9 widened the code (nccl.h)
  v.major = code / major_unit;
  v.minor = code % major_unit / 100;
  v.patch = code % 100;
  return v;
}

std::string NcclVersionText(int code) {
  const NcclVersion v = DecodeNcclVersion(code);
  return std::to_string(v.major) + "." + std::to_string(v.minor) + "." + std::to_string(v.patch);
}

Status CheckNcclRunTimeVersion(int built_with, int run_time) {
  const NcclVersion built = DecodeNcclVersion(built_with);
  const NcclVersion loaded = DecodeNcclVersion(run_time);
  if (std::tie(loaded.major, loaded.minor, loaded.patch) >=
      std::tie(built.major, built.minor, built.patch)) {
    return Status::Ok();
  }
  return FailedPrecondition("NCCL at run time (" + NcclVersionText(run_time) +
                            ", the libnccl.so.2 the loader found) is older than the one kolo was "
                            "built with (" +
                            NcclVersionText(built_with) + "); put NCCL " +
                            NcclVersionText(built_with) +
                            " or newer first on LD_LIBRARY_PATH, or rebuild kolo against the "
                            "older one");
}

}  // namespace kolo::gpu
