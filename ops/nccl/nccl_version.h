// NCCL's version codes (NCCL_VERSION_CODE at build time, ncclGetVersion at run time) as text,
// and the check that the library loaded at run time is not older than the one kolo was built
// with: an older libnccl may lack what kolo calls (or fix it differently) and fails late and
// obscurely, so the backend refuses to start instead. Pure functions; thread-safe.
#pragma once

#include <string>

#include "kolo/status.h"

namespace kolo::gpu {

struct NcclVersion {
  int major = 0;
  int minor = 0;
  int patch = 0;
};

// NCCL encodes X.Y.Z as X*10000 + Y*100 + Z since 2.9, and as X*1000 + Y*100 + Z up to 2.8
// (nccl.h, NCCL_VERSION): 22809 is 2.28.9, 2804 is 2.8.4.
NcclVersion DecodeNcclVersion(int code);
// "2.28.9".
std::string NcclVersionText(int code);

// OK when `run_time` (ncclGetVersion) is `built_with` (NCCL_VERSION_CODE) or newer;
// FailedPrecondition naming both versions and what to do otherwise.
Status CheckNcclRunTimeVersion(int built_with, int run_time);

}  // namespace kolo::gpu
