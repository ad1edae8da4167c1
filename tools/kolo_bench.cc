// kolo-bench: a collective sweep through kolo's public API (kolo::init, kolo::allreduce,
// allgather, broadcast, reducescatter, alltoall, kolo::shutdown) in the style of nccl-tests'
// all_reduce_perf, all_gather_perf, broadcast_perf, reduce_scatter_perf and alltoall_perf.
// Run it under kolorun:
//   kolorun -np 4 kolo-bench -b 4K -e 64M -d all -o all
//   kolorun -np 4 kolo-bench -b 4K -e 64M -o allgather
//   kolorun -np 2 kolo-bench --model resnet50       (a training step against the raw data plane)
//   kolorun -np 4 kolo-bench --device cuda-sim -o all   (GPU tensors, on simulated GPUs)
// Rank 0 prints one line per message size; every rank checks every iteration's result
// exactly, and all ranks exit 1 if any element anywhere was wrong.
#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "kolo/kolo.h"
#include "ops/nccl/nccl_backend.h"
#include "runtime/raw_data_plane.h"
#include "tools/bench/bench_collective.h"
#include "tools/bench/bench_device.h"
#include "tools/bench/bench_options.h"
#include "tools/bench/busy_load.h"
#include "tools/bench/model_bench.h"
#include "tools/bench/p2p_bench.h"

namespace {

using kolo::DataType;
using kolo::ReduceOp;
using kolo::Status;
using kolo::StatusOr;
using kolo::TensorView;
using kolo::bench::BenchOp;
using kolo::bench::BenchOptions;
using kolo::bench::BenchShape;
using kolo::bench::Collective;
using kolo::bench::CollectiveName;
using kolo::bench::CollectivePattern;
using kolo::bench::RedopName;

struct Row {
  BenchShape shape;
  double time_us = 0;  // mean over iterations of the slowest rank's time
  int64_t wrong = 0;   // over all ranks and iterations
};

// `status` with the op and its tensor named, unless kolo's message already names them.
Status Named(const Status& status, const std::string& op, const std::string& name) {
  if (status.ok()) return status;  // built for an error only: this runs inside the timed op
  const std::string what = op + " '" + name + "'";
  if (status.message().find(what) != std::string::npos) return status;
  return status.WithContext(what);
}

// Blocking allreduce with the op's name in the error.
Status Allreduce(const std::string& name, const TensorView& in, const TensorView& out,
                 ReduceOp op) {
  kolo::AllreduceOptions options;
  options.op = op;
  return Named(kolo::allreduce(name, in, out, options), "allreduce", name);
}

// One blocking run of `op`'s collective on the bench's buffers (`in` is unused by broadcast,
// which works in place on `out`; allgather's and alltoall's output goes to `out`, whose shape
// they check; alltoall splits evenly and checks that it received `out` / `ranks` rows from each
// of the `ranks` ranks it runs among).
Status RunCollective(const std::string& name, const BenchOp& op, int root, int ranks,
                     const TensorView& in, const TensorView& out) {
  Status status;
  switch (op.collective) {
    case Collective::kAllreduce:
      return Allreduce(name, in, out, op.reduce);
    case Collective::kAllgather:
      status = kolo::allgather(name, in, [&out](const std::vector<int64_t>& shape) -> void* {
        return shape == out.shape ? out.data : nullptr;
      });
      break;
    case Collective::kBroadcast:
      status = kolo::broadcast(name, out, root);
      break;
    case Collective::kReducescatter: {
      kolo::AllreduceOptions options;
      options.op = op.reduce;
      status = kolo::reducescatter(name, in, out, options);
      break;
    }
    case Collective::kAlltoall: {
      std::vector<int64_t> received;
      status = kolo::alltoall(
          name, in, {},
          [&out](const std::vector<int64_t>& shape) -> void* {
            return shape == out.shape ? out.data : nullptr;
          },
          &received);
      if (status.ok() &&
          received != std::vector<int64_t>(static_cast<size_t>(ranks), out.shape[0] / ranks)) {
        status = kolo::Internal("received splits do not split " + std::to_string(out.shape[0]) +
                                " rows evenly");
      }
      break;
    }
  }
  return Named(status, CollectiveName(op.collective), name);
}

std::string FormatTime(double us) {
  char text[32];
  const char* format = us >= 10000.0 ? "%7.0f" : us >= 100.0 ? "%7.1f" : "%7.2f";
  std::snprintf(text, sizeof(text), format, us);
  return text;
}

class Sweep {
 public:
  explicit Sweep(const BenchOptions& options);
  // Runs every dtype x op x size; rank 0 prints a row for each.
  Status Run();
  int64_t total_wrong() const { return total_wrong_; }
  const std::string& skipped_types() const { return skipped_types_; }
  double average_busbw() const { return rows_ == 0 ? 0.0 : busbw_sum_ / rows_; }

 private:
  StatusOr<Row> RunSize(DataType dtype, const BenchOp& op, int64_t bytes);
  // One run of the collective (or, with --raw, of the data plane alone on a copy of the
  // input in `out`); its time in `time_us` if not null.
  Status RunOnce(const std::string& name, const BenchOp& op, const TensorView& in,
                 const TensorView& out, double* time_us);
  // `out` holds the pattern in host memory; the ops write `run_out` (out itself, or its device
  // copy, uploaded before and downloaded after each timed op).
  Status TimeIterations(const std::string& name, const TensorView& in, const TensorView& out,
                        const TensorView& run_out, const BenchOp& op,
                        const CollectivePattern& pattern, Row* row);
  // With --inplace: writes the input pattern over `out` (and its device copy, `run_out`) again,
  // untimed, since the last op replaced it with its result. Does nothing otherwise.
  Status RefillInPlace(const CollectivePattern& pattern, const TensorView& out,
                       const TensorView& run_out);
  // --barrier's wait for every rank: a one-element allreduce through the path the timed ops
  // take (the data plane alone with --raw), so that the ranks leave it as closely together as
  // the path allows. kolo::barrier() would do, but it goes through the controller every time,
  // and its ranks return tens of microseconds apart over gRPC: the skew the barrier is there
  // to remove.
  Status Barrier();
  // Turns per-rank iteration times and wrong counts into job-wide ones (max, sum).
  Status ReduceResults(std::vector<double>* times, int64_t* wrong);
  void Print(DataType dtype, const BenchOp& op, const Row& row);

  const BenchOptions options_;
  const int rank_ = kolo::rank();
  // --set's ranks 0 .. N-1 are the set's: the same numbers, fewer of them.
  const int size_ = options_.set_ranks > 0 ? options_.set_ranks : kolo::size();
  // uint64_t: 8-byte alignment for every dtype. Allocated by Run(), without throwing. The
  // patterns are written and checked here; with a GPU (device_) the ops run on device copies.
  std::unique_ptr<uint64_t[]> input_;
  std::unique_ptr<uint64_t[]> output_;
  std::unique_ptr<kolo::bench::BenchDevice> device_;  // null: the tensors are input_/output_
  void* device_input_ = nullptr;
  void* device_output_ = nullptr;
  std::string skipped_types_;  // the types NCCL lacks, left out of -d all
  int64_t total_wrong_ = 0;
  double busbw_sum_ = 0;
  int rows_ = 0;
};

Sweep::Sweep(const BenchOptions& options) : options_(options) {}

Status Sweep::Run() {
  const size_t words = static_cast<size_t>(options_.max_bytes / 8 + 1);
  input_.reset(new (std::nothrow) uint64_t[words]);
  output_.reset(new (std::nothrow) uint64_t[words]);
  if (!input_ || !output_) {
    return kolo::InvalidArgument("cannot allocate two buffers of --maxbytes " +
                                 std::to_string(options_.max_bytes) + " bytes");
  }
  if (options_.device != "cpu") {
    KOLO_ASSIGN_OR_RETURN(device_,
                          kolo::bench::OpenBenchDevice(options_.device, rank_, kolo::local_rank()));
    KOLO_ASSIGN_OR_RETURN(device_input_, device_->Alloc(words * 8));
    KOLO_ASSIGN_OR_RETURN(device_output_, device_->Alloc(words * 8));
  }
  if (options_.root >= size_) {
    return kolo::InvalidArgument("--root " + std::to_string(options_.root) + " is not a rank of " +
                                 std::to_string(size_));
  }
  // Every type (-d all) on NCCL: the types NCCL lacks are left out and named in the footer;
  // one such type asked for alone fails as the runtime refuses it.
  bool nccl = false;
  if (options_.dtypes.size() > 1 && device_ != nullptr) {
    KOLO_ASSIGN_OR_RETURN(std::string path, kolo::internal::GpuOperationsInUse());
    nccl = path == "nccl";
  }
  for (DataType dtype : options_.dtypes) {
    if (nccl && !kolo::gpu::NcclHasDataType(dtype)) {
      skipped_types_ += (skipped_types_.empty() ? "" : " ") + kolo::bench::BenchTypeName(dtype);
      continue;
    }
    for (const BenchOp& op : options_.ops) {
      if (dtype == DataType::kBool && op.reduce == ReduceOp::kAverage) continue;  // refused
      for (int64_t bytes : kolo::bench::SweepSizes(options_)) {
        KOLO_ASSIGN_OR_RETURN(Row row, RunSize(dtype, op, bytes));
        total_wrong_ += row.wrong;
        Print(dtype, op, row);
      }
    }
  }
  return Status::Ok();
}

StatusOr<Row> Sweep::RunSize(DataType dtype, const BenchOp& op, int64_t bytes) {
  Row row;
  row.shape = kolo::bench::ShapeFor(op.collective, dtype, bytes, size_);
  TensorView in{input_.get(), dtype, {row.shape.input_count}, kolo::Device::Cpu()};
  TensorView out{output_.get(), dtype, {row.shape.output_count}, kolo::Device::Cpu()};
  // One name per (dtype, op, size), reused by every iteration: the response cache's case.
  const std::string name = "bench/" + kolo::bench::BenchTypeName(dtype) + "/" +
                           CollectiveName(op.collective) + "/" + RedopName(op) + "/" +
                           std::to_string(row.shape.count);
  CollectivePattern pattern(op, dtype, rank_, size_, options_.root, row.shape);
  // Broadcast works in place: root's input is its output tensor; so does --inplace allreduce.
  pattern.FillInput(op.collective == Collective::kBroadcast || options_.inplace ? out.data
                                                                                : in.data);
  TensorView run_out = out;  // what the ops write: `out`, or its copy on the device
  if (device_ != nullptr) {
    KOLO_RETURN_IF_ERROR(device_->Upload(device_input_, in.data, in.num_bytes()));
    KOLO_RETURN_IF_ERROR(device_->Upload(device_output_, out.data, out.num_bytes()));
    in.data = device_input_;
    in.device = run_out.device = device_->device();
    run_out.data = device_output_;
  }
  const TensorView& run_in = options_.inplace ? run_out : in;
  for (int i = 0; i < options_.warmup_iters; ++i) {
    KOLO_RETURN_IF_ERROR(RefillInPlace(pattern, out, run_out));
    KOLO_RETURN_IF_ERROR(RunOnce(name, op, run_in, run_out, nullptr));
  }
  KOLO_RETURN_IF_ERROR(TimeIterations(name, run_in, out, run_out, op, pattern, &row));
  return row;
}

Status Sweep::RefillInPlace(const CollectivePattern& pattern, const TensorView& out,
                            const TensorView& run_out) {
  if (!options_.inplace) return Status::Ok();
  pattern.FillInput(out.data);
  if (device_ == nullptr) return Status::Ok();
  return device_->Upload(run_out.data, out.data, out.num_bytes());
}

Status Sweep::RunOnce(const std::string& name, const BenchOp& op, const TensorView& in,
                      const TensorView& out, double* time_us) {
  using Clock = std::chrono::steady_clock;
  if (options_.raw && in.data != out.data) {
    std::memcpy(out.data, in.data, out.num_bytes());  // untimed
  }
  Clock::time_point start = Clock::now();
  Status status = options_.raw
                      ? kolo::internal::RawAllreduce(out.data, out.num_elements(), out.dtype)
                      : RunCollective(name, op, options_.root, size_, in, out);
  if (time_us != nullptr) {
    *time_us = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
  }
  return status.ok() || !options_.raw ? status : status.WithContext("raw allreduce");
}

Status Sweep::TimeIterations(const std::string& name, const TensorView& in, const TensorView& out,
                             const TensorView& run_out, const BenchOp& op,
                             const CollectivePattern& pattern, Row* row) {
  std::vector<double> times(static_cast<size_t>(options_.iters));
  int64_t wrong = 0;
  for (double& time : times) {
    // Untimed: the input again (--inplace) or the poison (and broadcast root's input) to the
    // device, the result back.
    if (options_.inplace) {
      pattern.FillInput(out.data);
    } else if (options_.check) {
      pattern.FillPoison(out.data);
    }
    if (device_ != nullptr) {
      KOLO_RETURN_IF_ERROR(device_->Upload(run_out.data, out.data, out.num_bytes()));
    }
    if (options_.barrier) KOLO_RETURN_IF_ERROR(Barrier());
    KOLO_RETURN_IF_ERROR(RunOnce(name, op, in, run_out, &time));
    if (device_ != nullptr) {
      KOLO_RETURN_IF_ERROR(device_->Download(out.data, run_out.data, out.num_bytes()));
    }
    if (options_.check) wrong += pattern.CountWrong(out.data);
  }
  KOLO_RETURN_IF_ERROR(ReduceResults(&times, &wrong));
  double total = 0;
  for (double time : times) total += time;
  row->time_us = total / static_cast<double>(times.size());
  if (options_.median) {
    std::sort(times.begin(), times.end());
    const size_t n = times.size();
    row->time_us = n % 2 == 1 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2;
  }
  row->wrong = wrong;
  return Status::Ok();
}

Status Sweep::Barrier() {
  int64_t token = 0;
  const TensorView view{&token, DataType::kInt64, {1}, kolo::Device::Cpu()};
  Status status = options_.raw ? kolo::internal::RawAllreduce(&token, 1, DataType::kInt64)
                               : Allreduce("bench/barrier", view, view, ReduceOp::kSum);
  return status.WithContext("--barrier");
}

Status Sweep::ReduceResults(std::vector<double>* times, int64_t* wrong) {
  TensorView time_view{times->data(),
                       DataType::kFloat64,
                       {static_cast<int64_t>(times->size())},
                       kolo::Device::Cpu()};
  KOLO_RETURN_IF_ERROR(Allreduce("bench/times", time_view, time_view, ReduceOp::kMax));
  TensorView wrong_view{wrong, DataType::kInt64, {}, kolo::Device::Cpu()};
  return Allreduce("bench/wrong", wrong_view, wrong_view, ReduceOp::kSum);
}

void Sweep::Print(DataType dtype, const BenchOp& op, const Row& row) {
  const BenchShape& shape = row.shape;
  double algbw = row.time_us > 0 ? static_cast<double>(shape.bytes) / row.time_us / 1e3 : 0.0;
  double busbw = algbw * kolo::bench::BusBandwidthFactor(op.collective, size_);
  busbw_sum_ += busbw;
  ++rows_;
  if (rank_ != 0) return;
  std::string wrong = options_.check ? std::to_string(row.wrong) : "N/A";
  int root = op.collective == Collective::kBroadcast ? options_.root : -1;
  std::printf("%12" PRId64 "  %12" PRId64 "  %8s  %6s  %6d  %7s  %6.2f  %6.2f  %6s\n", shape.bytes,
              shape.count, kolo::bench::BenchTypeName(dtype).c_str(), RedopName(op).c_str(), root,
              FormatTime(row.time_us).c_str(), algbw, busbw, wrong.c_str());
  std::fflush(stdout);
}

void PrintHeader(const BenchOptions& options) {
  std::string collectives;
  for (const BenchOp& op : options.ops) {
    std::string name = CollectiveName(op.collective);
    if (collectives.find(name) == std::string::npos) {
      collectives += (collectives.empty() ? "" : ", ") + name;
    }
  }
  std::printf("# kolo-bench: %s over %d ranks%s, tensors on %s, %s\n", collectives.c_str(),
              options.set_ranks > 0 ? options.set_ranks : kolo::size(),
              options.set_ranks > 0
                  ? (" (a process set of the job's " + std::to_string(kolo::size()) + ")").c_str()
                  : "",
              options.device.c_str(),
              options.raw       ? "data plane alone, in place"
              : options.inplace ? "in place"
                                : "out of place");
  std::printf("#  minBytes %" PRId64 " maxBytes %" PRId64 " step: %" PRId64
              "(factor) warmup iters: %d iters: %d validation: %d\n",
              options.min_bytes, options.max_bytes, options.step_factor, options.warmup_iters,
              options.iters, options.check ? 1 : 0);
  std::printf("#\n");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "size", "count", "type", "redop",
              "root", "time", "algbw", "busbw", "#wrong");
  std::printf("# %10s  %12s  %8s  %6s  %6s  %7s  %6s  %6s  %6s\n", "(B)", "(elements)", "", "", "",
              "(us)", "(GB/s)", "(GB/s)", "");
  std::fflush(stdout);
}

void PrintFooter(const Sweep& sweep, bool check) {
  if (check) {
    std::printf("# Wrong elements     : %" PRId64 " %s\n", sweep.total_wrong(),
                sweep.total_wrong() == 0 ? "OK" : "FAILED");
  }
  if (!sweep.skipped_types().empty()) {
    std::printf("# Types left out     : %s (NCCL has none; KOLO_GPU_OPERATIONS=ring runs them)\n",
                sweep.skipped_types().c_str());
  }
  std::printf("# Avg bus bandwidth  : %g\n", sweep.average_busbw());
  std::printf("#\n");
  std::fflush(stdout);
}

// Runs the model or the sweep after init; returns the exit code (shutdown() is the caller's).
int RunWithInit(const BenchOptions& options) {
  if (!options.model.empty()) return kolo::bench::RunModelBench(options);
  if (options.pingpong) return kolo::bench::RunPingPongBench(options);
  std::optional<int> set;  // --set's process set
  if (options.set_ranks > 0) {
    std::vector<int> ranks;
    for (int r = 0; r < options.set_ranks; ++r) ranks.push_back(r);
    StatusOr<int> added =
        kolo::InvalidArgument("--set " + std::to_string(options.set_ranks) +
                              " is more than the job's " + std::to_string(kolo::size()) + " ranks");
    if (options.set_ranks <= kolo::size()) added = kolo::add_process_set(ranks);
    if (!added.ok()) {
      std::fprintf(stderr, "kolo-bench: rank %d: %s\n", kolo::rank(),
                   added.status().ToString().c_str());
      return 1;
    }
    set = *added;
  }
  if (kolo::rank() == 0) PrintHeader(options);
  Status status;
  int64_t wrong = 0;
  if (!set || kolo::rank() < options.set_ranks) {
    std::optional<kolo::ProcessSetScope> in_set;
    if (set) in_set.emplace(*set);
    // Gone before shutdown(): its device buffers belong to the runtime's device (cuda-sim).
    Sweep sweep(options);
    status = sweep.Run();
    if (!status.ok()) {
      std::fprintf(stderr, "kolo-bench: rank %d: %s\n", kolo::rank(), status.ToString().c_str());
    } else if (kolo::rank() == 0) {
      PrintFooter(sweep, options.check);
    }
    wrong = sweep.total_wrong();
  }
  if (set) {
    // The ranks outside the set wait for its members here, not in shutdown(): a rank that
    // calls shutdown() takes every rank's ops off the fast path (docs/FAST-PATH.md).
    Status waited = kolo::barrier();
    if (!waited.ok()) {
      std::fprintf(stderr, "kolo-bench: rank %d: the closing barrier: %s\n", kolo::rank(),
                   waited.ToString().c_str());
      if (status.ok()) status = waited;
    }
  }
  return status.ok() && wrong == 0 ? 0 : 1;
}

// init, the busy processes (--busy), the run, shutdown; returns the exit code.
int RunBench(const BenchOptions& options) {
  Status status = kolo::bench::PrepareBenchDevice(options.device);
  if (status.ok()) status = kolo::init();
  if (!status.ok()) {
    std::fprintf(stderr, "kolo-bench: kolo::init() failed: %s\n", status.ToString().c_str());
    return 1;
  }
  int code = 1;
  {
    // One set per host, started before the run and stopped after it, before shutdown().
    StatusOr<std::unique_ptr<kolo::bench::BusyLoad>> busy =
        kolo::bench::BusyLoad::Start(kolo::local_rank() == 0 ? options.busy : 0);
    if (busy.ok()) {
      code = RunWithInit(options);
    } else {
      std::fprintf(stderr, "kolo-bench: rank %d: %s\n", kolo::rank(),
                   busy.status().ToString().c_str());
    }
  }
  Status down = kolo::shutdown();
  if (!down.ok()) {
    std::fprintf(stderr, "kolo-bench: kolo::shutdown() failed: %s\n", down.ToString().c_str());
  }
  return down.ok() ? code : 1;
}

}  // namespace

int main(int argc, char** argv) {
  StatusOr<BenchOptions> options =
      kolo::bench::ParseBenchOptions(std::vector<std::string>(argv + 1, argv + argc));
  if (!options.ok()) {
    std::fprintf(stderr, "kolo-bench: %s\nRun 'kolo-bench --help' for usage.\n",
                 options.status().message().c_str());
    return 2;
  }
  if (options->show_help) {
    std::fputs(kolo::bench::BenchUsage().c_str(), stdout);
    return 0;
  }
  return RunBench(options.value());
}
