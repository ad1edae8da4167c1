#include "ops/nccl/nccl_backend.h"

#if KOLO_HAVE_NCCL
#include "ops/nccl/nccl_collectives.h"
#endif

namespace kolo::gpu {

bool NcclBuilt() {
  return KOLO_HAVE_NCCL != 0;
}

int NcclBuiltVersion() {
#if KOLO_HAVE_NCCL
  return NcclCollectiveApi::BuiltVersion();
#else
  return 0;
#endif
}

bool NcclHasDataType(DataType dtype) {
  switch (dtype) {
    case DataType::kUInt8:
    case DataType::kInt8:
    case DataType::kInt32:
    case DataType::kInt64:
    case DataType::kFloat16:
    case DataType::kBFloat16:
    case DataType::kFloat32:
    case DataType::kFloat64:
      return true;
    case DataType::kUInt16:  // NCCL has no 16-bit integers and no bool
    case DataType::kInt16:
    case DataType::kBool:
      return false;
  }
  return false;  // a value outside the enum
}

StatusOr<std::unique_ptr<CollectiveApi>> NewNcclCollectiveApi(const NcclOptions& options) {
#if KOLO_HAVE_NCCL
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<NcclCollectiveApi> api, NcclCollectiveApi::Create(options));
  return std::unique_ptr<CollectiveApi>(std::move(api));
#else
  (void)options;
  return FailedPrecondition(
      "kolo was built without NCCL (KOLO_WITH_NCCL=OFF, no CUDA, or no nccl.h and libnccl found "
      "at configure time); install NCCL (or point NCCL_ROOT at it) and rebuild with CUDA for "
      "GPU collectives");
#endif
}

}  // namespace kolo::gpu
