// KoloBackend's gathering collectives: allgather (lists, into one tensor, coalesced) on kolo's
// allgather; gather and scatter on kolo's alltoall, where only the root receives (gather) or
// sends (scatter) rows, so each moves what NCCL's would, not the allgather's size times more.
#include <torch/extension.h>

#include <functional>
#include <memory>
#include <utility>

#include "python/csrc/c10d/kolo_backend.h"
#include "python/csrc/c10d/landing.h"

namespace kolo::torch_ext {

using namespace c10d_args;  // NOLINT: the backend's shared helpers

namespace {

// Every tensor of `list` must match `like` in dtype and element count (c10d's per-rank lists).
void CheckList(const std::vector<at::Tensor>& list, const at::Tensor& like, int size,
               const char* op, const char* what) {
  if (static_cast<int>(list.size()) != size) {
    Fail(std::string(op) + ": the " + what + " list has " + std::to_string(list.size()) +
         " tensors for a group of " + std::to_string(size));
  }
  for (size_t i = 0; i < list.size(); ++i) {
    if (list[i].scalar_type() != like.scalar_type() || list[i].numel() != like.numel()) {
      Fail(std::string(op) + ": " + what + " tensor " + std::to_string(i) + " is " +
           std::string(c10::toString(list[i].scalar_type())) + " with " +
           std::to_string(list[i].numel()) + " elements, expected " +
           std::string(c10::toString(like.scalar_type())) + " with " +
           std::to_string(like.numel()));
    }
  }
}

// The finisher's error when a landing did not get the size every rank should have sent.
Status SizeMismatch(const char* op, const Landing& landing, const char* hint) {
  return Status(StatusCode::kInvalidArgument,
                std::string(op) + ": the ranks' tensors added up to " + landing.ArrivedShape() +
                    " elements' shape where this rank expected " +
                    std::to_string(landing.target().numel()) + " elements (" + hint + ")");
}

// The rows each group rank sent this rank in a gather or scatter (kolo's received splits),
// against what `root` alone sending `rows` (or, to the root, every rank one) gives. Ranks that
// disagree about the root are caught here even when the row counts happen to add up (a
// scatter in which a non-root expects another root: it receives the real root's row).
Status CheckSources(const char* op, const std::vector<int64_t>& received,
                    const std::vector<int64_t>& expected, int64_t root) {
  if (received == expected) return Status::Ok();
  return InvalidArgument(std::string(op) + ": the group's ranks sent this rank " +
                         ShapeToString(received) + " rows each, where root rank " +
                         std::to_string(root) + " means " + ShapeToString(expected) +
                         " (do all ranks pass the same root?)");
}

// Copies rows of `flat` ([n, m], contiguous) into the n tensors of `list`.
void Unpack(const at::Tensor& flat, const std::vector<at::Tensor>& list) {
  for (size_t i = 0; i < list.size(); ++i) {
    list[i].copy_(flat.select(0, static_cast<int64_t>(i)).view(list[i].sizes()));
  }
}

// A gathering op's delivery into the caller's list: row i into list[i].
std::function<Status(const at::Tensor&)> UnpackTo(std::vector<at::Tensor> list) {
  return [list = std::move(list)](const at::Tensor& rows) {
    Unpack(rows, list);
    return Status::Ok();
  };
}

}  // namespace

c10::intrusive_ptr<c10d::Work> KoloBackend::allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                                      std::vector<at::Tensor>& inputs,
                                                      const c10d::AllgatherOptions& opts) {
  const at::Tensor input = Single(inputs, "allgather");
  if (outputs.size() != 1) Fail("allgather takes exactly one output list");
  const std::vector<at::Tensor> list = outputs[0];
  CheckList(list, input, size_, "allgather", "output");
  Launch launch;
  launch.type = c10d::OpType::ALLGATHER;
  launch.title = "kolo:all_gather";
  launch.op = "allgather";
  launch.outputs = list;
  const at::Tensor rows = at::empty({size_, input.numel()}, input.options());
  return IssueAllgather(std::move(launch), input, rows, UnpackTo(list), opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::all_gather_single(at::Tensor& output, at::Tensor& input,
                                                              const c10d::AllgatherOptions& opts) {
  if (output.scalar_type() != input.scalar_type() || output.numel() != size_ * input.numel()) {
    Fail("all_gather_into_tensor: the output must hold the group's size (" + std::to_string(size_) +
         ") times the input's " + std::to_string(input.numel()) + " elements of " +
         std::string(c10::toString(input.scalar_type())) + ", it holds " +
         std::to_string(output.numel()) + " of " +
         std::string(c10::toString(output.scalar_type())));
  }
  auto io = std::make_shared<Contiguous>(output);
  Launch launch;
  launch.type = c10d::OpType::_ALLGATHER_BASE;
  launch.title = "kolo:all_gather_into_tensor";
  launch.op = "all_gather_into_tensor";
  launch.outputs = {output};
  launch.keep_alive = {io->buffer};
  if (input.is_cuda()) launch.cuda_inputs = {io->buffer};
  return IssueAllgather(
      std::move(launch), input, io->buffer.view({size_, input.numel()}),
      [io](const at::Tensor&) { return io->CopyBack(); }, opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::IssueAllgather(Launch launch, const at::Tensor& input,
                                                           const at::Tensor& rows, Deliver deliver,
                                                           const c10d::AllgatherOptions& opts) {
  const at::Tensor flat_in = input.contiguous().view({1, input.numel()});
  auto landing = std::make_shared<Landing>(rows);
  const TensorView in = View(flat_in, launch.op);
  AddView(&Begin(&launch.signature, OpType::kAllgather), in, true);
  launch.keep_alive.push_back(flat_in);
  if (input.is_cuda()) launch.cuda_inputs.push_back(flat_in);
  launch.finish = [landing, op = launch.op, deliver = std::move(deliver)] {
    if (!landing->Fits()) return SizeMismatch(op, *landing, "inputs of one size");
    return deliver(landing->target());
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::allgather_async(name, in, Landing::AllocatorOf(landing), std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::all_gather_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  if (inputs.empty() || outputs.size() != inputs.size()) {
    Fail("all_gather_into_tensor_coalesced: " + std::to_string(inputs.size()) + " inputs and " +
         std::to_string(outputs.size()) + " outputs");
  }
  Launch launch;
  launch.type = c10d::OpType::ALLGATHER_INTO_TENSOR_COALESCED;
  launch.title = "kolo:all_gather_into_tensor_coalesced";
  launch.op = "all_gather_into_tensor_coalesced";
  Begin(&launch.signature, OpType::kAllgather).Add(static_cast<int64_t>(inputs.size()));
  std::vector<TensorView> ins;
  std::vector<std::shared_ptr<Landing>> landings;
  std::vector<std::shared_ptr<Contiguous>> ios;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const at::Tensor& input = inputs[i];
    if (outputs[i].scalar_type() != input.scalar_type() ||
        outputs[i].numel() != size_ * input.numel()) {
      Fail("all_gather_into_tensor_coalesced: output " + std::to_string(i) +
           " does not hold the group's size times its input");
    }
    ios.push_back(std::make_shared<Contiguous>(outputs[i]));
    const at::Tensor flat_in = input.contiguous().view({1, input.numel()});
    landings.push_back(std::make_shared<Landing>(ios.back()->buffer.view({size_, input.numel()})));
    ins.push_back(View(flat_in, "all_gather_into_tensor_coalesced"));
    AddView(&launch.signature, ins.back(), true);
    launch.keep_alive.push_back(flat_in);
    launch.keep_alive.push_back(ios.back()->buffer);
    if (input.is_cuda()) launch.cuda_inputs.push_back(flat_in);
  }
  launch.outputs = outputs;
  launch.finish = [landings, ios] {
    for (size_t i = 0; i < landings.size(); ++i) {
      if (!landings[i]->Fits()) {
        return SizeMismatch("all_gather_into_tensor_coalesced", *landings[i], "inputs of one size");
      }
      KOLO_RETURN_IF_ERROR(ios[i]->CopyBack());
    }
    return Status::Ok();
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    std::vector<Allocator> allocators;
    for (size_t i = 0; i < ins.size(); ++i) allocators.push_back(Landing::AllocatorOf(landings[i]));
    return kolo::grouped_allgather_async(MemberNames(name, ins.size()), ins, std::move(allocators),
                                         std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::gather(std::vector<std::vector<at::Tensor>>& outputs,
                                                   std::vector<at::Tensor>& inputs,
                                                   const c10d::GatherOptions& opts) {
  const at::Tensor input = Single(inputs, "gather");
  CheckRoot(opts.rootRank, size_, "gather");
  const bool root = opts.rootRank == rank_;
  std::vector<at::Tensor> list;
  if (root) {
    if (outputs.size() != 1) Fail("gather takes exactly one output list on the root");
    list = outputs[0];
    CheckList(list, input, size_, "gather", "output");
  } else if (!outputs.empty() && !outputs[0].empty()) {
    Fail("gather: only the root (rank " + std::to_string(opts.rootRank) +
         ") passes an output list");
  }
  Launch launch;
  launch.type = c10d::OpType::GATHER;
  launch.title = "kolo:gather";
  launch.op = "gather";
  launch.outputs = list;
  const at::Tensor rows = at::empty({root ? size_ : 0, input.numel()}, input.options());
  return IssueGather(std::move(launch), input, rows, UnpackTo(list), opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::gather_single(at::Tensor& output, at::Tensor& input,
                                                          const c10d::GatherOptions& opts) {
  CheckRoot(opts.rootRank, size_, "gather_into_tensor");
  const bool root = opts.rootRank == rank_;
  if (root &&
      (output.scalar_type() != input.scalar_type() || output.numel() != size_ * input.numel())) {
    Fail("gather_into_tensor: the root's output must hold the group's size times the input");
  }
  auto io = std::make_shared<Contiguous>(root ? output : at::empty({0}, input.options()));
  Launch launch;
  launch.type = c10d::OpType::GATHER;
  launch.title = "kolo:gather_into_tensor";
  launch.op = "gather_into_tensor";
  launch.outputs = {output};
  launch.keep_alive = {io->buffer};
  return IssueGather(
      std::move(launch), input, io->buffer.view({root ? size_ : 0, input.numel()}),
      [io](const at::Tensor&) { return io->CopyBack(); }, opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::IssueGather(Launch launch, const at::Tensor& input,
                                                        const at::Tensor& rows, Deliver deliver,
                                                        const c10d::GatherOptions& opts) {
  const bool root = opts.rootRank == rank_;
  // Every rank sends its one row to the root; the root receives the group's rows in order.
  const at::Tensor flat_in = input.contiguous().view({1, input.numel()});
  std::vector<int64_t> splits(static_cast<size_t>(size_), 0);
  splits[static_cast<size_t>(opts.rootRank)] = 1;
  auto landing = std::make_shared<Landing>(rows);
  const TensorView in = View(flat_in, launch.op);
  AddView(&Begin(&launch.signature, OpType::kAlltoall), in, true);  // not the root: see Begin
  launch.keep_alive.push_back(flat_in);
  if (input.is_cuda()) launch.cuda_inputs.push_back(flat_in);
  auto received = std::make_shared<std::vector<int64_t>>();
  const std::vector<int64_t> expected(static_cast<size_t>(size_), root ? 1 : 0);
  launch.finish = [landing, received, expected, op = launch.op, root_rank = opts.rootRank,
                   deliver = std::move(deliver)] {
    KOLO_RETURN_IF_ERROR(CheckSources(op, *received, expected, root_rank));
    if (!landing->Fits()) return SizeMismatch(op, *landing, "one root, inputs of one size");
    return deliver(landing->target());
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::alltoall_async(name, in, splits, Landing::AllocatorOf(landing), received.get(),
                                std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::scatter(std::vector<at::Tensor>& outputs,
                                                    std::vector<std::vector<at::Tensor>>& inputs,
                                                    const c10d::ScatterOptions& opts) {
  const at::Tensor output = Single(outputs, "scatter");
  CheckRoot(opts.rootRank, size_, "scatter");
  const bool root = opts.rootRank == rank_;
  // The root sends row i of its inputs to rank i; the others send nothing.
  at::Tensor flat_in;
  if (root) {
    if (inputs.size() != 1) Fail("scatter takes exactly one input list on the root");
    CheckList(inputs[0], output, size_, "scatter", "input");
    std::vector<at::Tensor> rows;
    for (const at::Tensor& t : inputs[0]) rows.push_back(t.reshape({1, output.numel()}));
    flat_in = at::cat(rows, 0);
  } else {
    if (!inputs.empty() && !inputs[0].empty()) {
      Fail("scatter: only the root (rank " + std::to_string(opts.rootRank) +
           ") passes an input list");
    }
    flat_in = at::empty({0, output.numel()}, output.options());
  }
  const std::vector<int64_t> splits(static_cast<size_t>(size_), root ? 1 : 0);
  auto io = std::make_shared<Contiguous>(output);
  auto landing = std::make_shared<Landing>(io->buffer.view({1, output.numel()}));
  const TensorView in = View(flat_in, "scatter");
  Launch launch;
  launch.type = c10d::OpType::SCATTER;
  launch.title = "kolo:scatter";
  launch.op = "scatter";
  AddView(&Begin(&launch.signature, OpType::kAlltoall), in, true);  // a non-root sends no rows
  launch.outputs = {output};
  launch.keep_alive = {flat_in, io->buffer};
  if (output.is_cuda()) launch.cuda_inputs = {flat_in};
  auto received = std::make_shared<std::vector<int64_t>>();
  std::vector<int64_t> expected(static_cast<size_t>(size_), 0);
  expected[static_cast<size_t>(opts.rootRank)] = 1;
  const int64_t root_rank = opts.rootRank;
  launch.finish = [landing, io, received, expected, root_rank] {
    KOLO_RETURN_IF_ERROR(CheckSources("scatter", *received, expected, root_rank));
    if (!landing->Fits()) return SizeMismatch("scatter", *landing, "one root, outputs of one size");
    return io->CopyBack();
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::alltoall_async(name, in, splits, Landing::AllocatorOf(landing), received.get(),
                                std::move(done));
  });
}

}  // namespace kolo::torch_ext
