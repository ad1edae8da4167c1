// The real NCCL backend on whatever machine this runs. In a build with NCCL: what needs no GPU
// works (the version, unique ids, groups), what needs one fails at once in CUDA's or NCCL's
// words (never a hang or a crash), and arguments NCCL has no meaning for are refused before any
// NCCL call. (On the machines kolo is developed on there is NCCL and CUDA but no driver.) The
// collectives themselves need a GPU: nccl_device_test.cc.
#include "ops/nccl/nccl_backend.h"

#include <catch2/catch.hpp>
#include <chrono>

#include "ops/cuda/cuda_backend.h"
#include "ops/nccl/nccl_version.h"

using namespace kolo;
using namespace kolo::gpu;

namespace {

// NCCL behind CollectiveApi; null (after checking what the factory says) without NCCL.
std::unique_ptr<CollectiveApi> Backend() {
  StatusOr<std::unique_ptr<CollectiveApi>> api = NewNcclCollectiveApi();
  if (!NcclBuilt()) {
    CHECK_FALSE(api.ok());
    CHECK(api.status().code() == StatusCode::kFailedPrecondition);
    CHECK_THAT(api.status().message(), Catch::StartsWith("kolo was built without NCCL"));
    CHECK(NcclBuiltVersion() == 0);
    return nullptr;
  }
  INFO(api.status().ToString());
  REQUIRE(api.ok());
  return std::move(api).value();
}

constexpr auto kBadType = static_cast<DataType>(42);

}  // namespace

TEST_CASE("The backend reports the NCCL it runs on, the one this build found", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  CHECK(nccl->name() == "nccl");
  StatusOr<int> version = nccl->Version();
  REQUIRE(version.ok());
  INFO("NCCL " << NcclVersionText(*version) << ", built with "
               << NcclVersionText(NcclBuiltVersion()));
  // The test binary's run path is the libnccl the configure step found beside its nccl.h.
  CHECK(*version == NcclBuiltVersion());
  CHECK(nccl->Version().value() == *version);
}

TEST_CASE("Every unique id is fresh", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  StatusOr<UniqueId> a = nccl->NewUniqueId();
  StatusOr<UniqueId> b = nccl->NewUniqueId();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(*a != *b);
  CHECK(*a != UniqueId{});
}

TEST_CASE("Without a usable device InitComm fails at once, in CUDA's words", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  StatusOr<std::unique_ptr<DeviceApi>> cuda = NewCudaDeviceApi();
  REQUIRE(cuda.ok());
  StatusOr<int> count = (*cuda)->DeviceCount();
  // Without a driver cuda:0 is unusable; on a GPU machine, the device past the last one.
  const int device = count.ok() ? *count : 0;
  StatusOr<UniqueId> id = nccl->NewUniqueId();
  REQUIRE(id.ok());

  const auto start = std::chrono::steady_clock::now();
  StatusOr<CommHandle> comm = nccl->InitComm(1, 0, *id, device);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(1));
  REQUIRE_FALSE(comm.ok());
  INFO(comm.status().ToString());
  const std::string where = "rank 0 of 1 on cuda:" + std::to_string(device);
  // NCCL needs the device set first; setting it is what fails, before NCCL is asked.
  CHECK_THAT(comm.status().message(),
             Catch::StartsWith("ncclCommInitRankConfig (" + where + "): cudaSetDevice: cudaError"));
  if (count.ok()) {
    CHECK(comm.status().code() == StatusCode::kInvalidArgument);
    CHECK_THAT(comm.status().message(), Catch::Contains("cudaErrorInvalidDevice"));
  } else {
    CHECK(comm.status().code() == StatusCode::kUnavailable);
    CHECK_THAT(comm.status().message(), Catch::Contains("cudaErrorInsufficientDriver") ||
                                            Catch::Contains("cudaErrorNoDevice"));
  }
}

TEST_CASE("A rank outside its communicator is refused before any call", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  StatusOr<CommHandle> comm = nccl->InitComm(2, 2, UniqueId{}, 0);
  REQUIRE_FALSE(comm.ok());
  CHECK(comm.status().code() == StatusCode::kInvalidArgument);
  CHECK(comm.status().message() ==
        "ncclCommInitRankConfig (rank 2 of 2 on cuda:0): no such rank or device");
}

TEST_CASE("A data type NCCL lacks is refused before any NCCL call, naming it", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  // No comm and no stream: had NCCL been called, it would have said so about the null comm.
  const std::vector<std::pair<const char*, Status>> refused = {
      {"ncclAllReduce",
       nccl->AllReduce(nullptr, nullptr, 4, kBadType, ReduceOp::kSum, 1.0, nullptr, nullptr)},
      {"ncclBroadcast", nccl->Broadcast(nullptr, nullptr, 4, kBadType, 0, nullptr, nullptr)},
      {"ncclAllGather", nccl->AllGather(nullptr, nullptr, 4, kBadType, nullptr, nullptr)},
      {"ncclReduceScatter",
       nccl->ReduceScatter(nullptr, nullptr, 4, kBadType, ReduceOp::kSum, 1.0, nullptr, nullptr)},
      {"ncclSend", nccl->Send(nullptr, 4, kBadType, 0, nullptr, nullptr)},
      {"ncclRecv", nccl->Recv(nullptr, 4, kBadType, 0, nullptr, nullptr)},
  };
  for (const auto& [call, status] : refused) {
    INFO(call << ": " << status.ToString());
    CHECK(status.code() == StatusCode::kInvalidArgument);
    CHECK(status.message() == std::string(call) + ": kolo data type dtype(42) has no NCCL type");
  }
}

TEST_CASE("A prescale NCCL cannot premultiply is refused before any NCCL call", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  const Status max = nccl->AllReduce(nullptr, nullptr, 4, DataType::kFloat32, ReduceOp::kMax, 0.5,
                                     nullptr, nullptr);
  CHECK(max.code() == StatusCode::kInvalidArgument);
  CHECK(max.message() ==
        "ncclAllReduce: a prescale of 0.500000 needs a floating data type and sum or average "
        "(ncclRedOpCreatePreMulSum), not float32 max");
  for (const ReduceOp op : {ReduceOp::kMin, ReduceOp::kProduct}) {
    const Status s =
        nccl->ReduceScatter(nullptr, nullptr, 4, DataType::kFloat64, op, 2.0, nullptr, nullptr);
    INFO(s.ToString());
    CHECK(s.code() == StatusCode::kInvalidArgument);
    CHECK_THAT(s.message(), Catch::StartsWith("ncclReduceScatter: a prescale of 2.000000"));
  }
  const Status integer =
      nccl->AllReduce(nullptr, nullptr, 4, DataType::kInt32, ReduceOp::kSum, 0.5, nullptr, nullptr);
  CHECK(integer.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(integer.message(), Catch::EndsWith("not int32 sum"));
  const Status op = nccl->AllReduce(nullptr, nullptr, 4, DataType::kFloat32,
                                    static_cast<ReduceOp>(9), 1.0, nullptr, nullptr);
  CHECK(op.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(op.message(), Catch::StartsWith("ncclAllReduce: kolo reduce op"));
  CHECK_THAT(op.message(), Catch::EndsWith("has no NCCL op"));

  // Arguments NCCL takes, and no communicator: refused as that.
  const Status no_comm = nccl->AllReduce(nullptr, nullptr, 4, DataType::kFloat32,
                                         ReduceOp::kAverage, 0.5, nullptr, nullptr);
  CHECK(no_comm.code() == StatusCode::kInvalidArgument);
  CHECK(no_comm.message() == "ncclAllReduce: not a communicator (null)");
  CHECK(nccl->PollComm(nullptr).status().code() == StatusCode::kInvalidArgument);
  CHECK(nccl->Abort(nullptr).code() == StatusCode::kInvalidArgument);
  CHECK(nccl->Destroy(nullptr).code() == StatusCode::kInvalidArgument);
}

TEST_CASE("Groups nest through NCCL, and a stray GroupEnd is NCCL's invalid usage", "[gpu][nccl]") {
  std::unique_ptr<CollectiveApi> nccl = Backend();
  if (nccl == nullptr) return;
  REQUIRE(nccl->GroupStart().ok());
  REQUIRE(nccl->GroupStart().ok());
  CHECK(nccl->GroupEnd().ok());
  CHECK(nccl->GroupEnd().ok());  // an empty group launches nothing: no device needed

  const Status stray = nccl->GroupEnd();
  INFO(stray.ToString());
  CHECK(stray.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(stray.message(), Catch::StartsWith("ncclGroupEnd: ncclInvalidUsage (5): "));
  CHECK_THAT(stray.message(), Catch::Contains("not in a group call"));  // ncclGetLastError's
}
