// KoloBackend's scattering collectives: reduce_scatter (lists, from one tensor, coalesced) on
// kolo's reducescatter over the inputs laid end to end (rank i's part is then exactly the
// elements c10d gives rank i), and all_to_all (with splits, and of lists) on kolo's alltoall.
#include <torch/extension.h>

#include <memory>
#include <numeric>
#include <utility>

#include "python/csrc/c10d/kolo_backend.h"
#include "python/csrc/c10d/landing.h"

namespace kolo::torch_ext {

using namespace c10d_args;  // NOLINT: the backend's shared helpers

namespace {

// The splits kolo receives with an alltoall, kept until the finisher reads them.
struct Received {
  std::vector<int64_t> splits;
};

std::string Join(const std::vector<int64_t>& values) {
  return ShapeToString(values);
}

}  // namespace

c10::intrusive_ptr<c10d::Work> KoloBackend::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor output = Single(outputs, "reduce_scatter");
  if (inputs.size() != 1 || static_cast<int>(inputs[0].size()) != size_) {
    Fail("reduce_scatter takes one input list of " + std::to_string(size_) + " tensors");
  }
  std::vector<at::Tensor> flat;
  for (size_t i = 0; i < inputs[0].size(); ++i) {
    const at::Tensor& t = inputs[0][i];
    if (t.scalar_type() != output.scalar_type() || t.numel() != output.numel()) {
      Fail("reduce_scatter: input tensor " + std::to_string(i) + " does not match the output (" +
           std::string(c10::toString(output.scalar_type())) + ", " +
           std::to_string(output.numel()) + " elements)");
    }
    flat.push_back(t.reshape({-1}));
  }
  const AllreduceOptions reduction = Reduction(opts.reduceOp, output, "reduce_scatter");
  return IssueReducescatter(c10d::OpType::REDUCE_SCATTER, "kolo:reduce_scatter", "reduce_scatter",
                            output, at::cat(flat, 0), reduction, opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::reduce_scatter_single(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  if (output.scalar_type() != input.scalar_type() || input.numel() != size_ * output.numel()) {
    Fail("reduce_scatter_tensor: the input must hold the group's size (" + std::to_string(size_) +
         ") times the output's " + std::to_string(output.numel()) + " elements of " +
         std::string(c10::toString(output.scalar_type())) + ", it holds " +
         std::to_string(input.numel()) + " of " + std::string(c10::toString(input.scalar_type())));
  }
  const AllreduceOptions reduction = Reduction(opts.reduceOp, output, "reduce_scatter_tensor");
  return IssueReducescatter(c10d::OpType::_REDUCE_SCATTER_BASE, "kolo:reduce_scatter_tensor",
                            "reduce_scatter_tensor", output, input.contiguous().view({-1}),
                            reduction, opts);
}

c10::intrusive_ptr<c10d::Work> KoloBackend::IssueReducescatter(
    c10d::OpType type, const char* title, const char* op, const at::Tensor& output,
    const at::Tensor& flat_in, const AllreduceOptions& reduction,
    const c10d::ReduceScatterOptions& opts) {
  auto io = std::make_shared<Contiguous>(output);
  const at::Tensor flat_out = io->buffer.view({-1});
  const TensorView in = View(flat_in, op);
  const TensorView out = View(flat_out, op);
  Launch launch;
  launch.type = type;
  launch.title = title;
  launch.op = op;
  AddView(&Begin(&launch.signature, OpType::kReducescatter), in);
  launch.signature.Add(static_cast<int64_t>(reduction.op)).Add(reduction.prescale);
  launch.outputs = {output};
  launch.keep_alive = {flat_in, io->buffer};
  if (output.is_cuda()) launch.cuda_inputs = {flat_in, io->buffer};
  if (!io->buffer.is_same(output)) launch.finish = [io] { return io->CopyBack(); };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::reducescatter_async(name, in, out, reduction, std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::reduce_scatter_single_coalesced(
    std::vector<at::Tensor>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  if (inputs.empty() || outputs.size() != inputs.size()) {
    Fail("reduce_scatter_tensor_coalesced: " + std::to_string(inputs.size()) + " inputs and " +
         std::to_string(outputs.size()) + " outputs");
  }
  const AllreduceOptions reduction =
      Reduction(opts.reduceOp, outputs[0], "reduce_scatter_tensor_coalesced");
  Launch launch;
  launch.type = c10d::OpType::REDUCE_SCATTER_TENSOR_COALESCED;
  launch.title = "kolo:reduce_scatter_tensor_coalesced";
  launch.op = "reduce_scatter_tensor_coalesced";
  Begin(&launch.signature, OpType::kReducescatter)
      .Add(static_cast<int64_t>(reduction.op))
      .Add(reduction.prescale)
      .Add(static_cast<int64_t>(inputs.size()));
  std::vector<TensorView> ins;
  std::vector<TensorView> outs;
  std::vector<std::shared_ptr<Contiguous>> ios;
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (outputs[i].scalar_type() != inputs[i].scalar_type() ||
        inputs[i].numel() != size_ * outputs[i].numel()) {
      Fail("reduce_scatter_tensor_coalesced: input " + std::to_string(i) +
           " does not hold the group's size times its output");
    }
    const at::Tensor flat_in = inputs[i].contiguous().view({-1});
    ios.push_back(std::make_shared<Contiguous>(outputs[i]));
    ins.push_back(View(flat_in, "reduce_scatter_tensor_coalesced"));
    outs.push_back(View(ios.back()->buffer.view({-1}), "reduce_scatter_tensor_coalesced"));
    AddView(&launch.signature, ins.back());
    launch.keep_alive.push_back(flat_in);
    launch.keep_alive.push_back(ios.back()->buffer);
    if (flat_in.is_cuda()) launch.cuda_inputs.push_back(flat_in);
  }
  launch.outputs = outputs;
  launch.finish = CopyBackAll(std::move(ios));
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::grouped_reducescatter_async(MemberNames(name, ins.size()), ins, outs, reduction,
                                             std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::all_to_all_single(at::Tensor& output, at::Tensor& input,
                                                              std::vector<int64_t>& output_splits,
                                                              std::vector<int64_t>& input_splits,
                                                              const c10d::AllToAllOptions& opts) {
  if (output.scalar_type() != input.scalar_type()) Fail("all_to_all_single: dtypes differ");
  if (input.dim() == 0 || output.dim() == 0) Fail("all_to_all_single of a scalar");
  const int64_t rows = input.size(0);
  const int64_t out_rows = output.size(0);
  const auto check_splits = [&](const std::vector<int64_t>& splits, int64_t total,
                                const char* which) {
    if (splits.empty()) {
      if (total % size_ != 0) {
        Fail(std::string("all_to_all_single: ") + which + " has " + std::to_string(total) +
             " rows, which the group's " + std::to_string(size_) + " ranks do not divide");
      }
      return;
    }
    if (static_cast<int>(splits.size()) != size_ ||
        std::accumulate(splits.begin(), splits.end(), int64_t{0}) != total) {
      Fail(std::string("all_to_all_single: ") + which + " split sizes " + Join(splits) +
           " do not split its " + std::to_string(total) + " rows among " + std::to_string(size_) +
           " ranks");
    }
  };
  check_splits(input_splits, rows, "the input");
  check_splits(output_splits, out_rows, "the output");
  const at::Tensor in_buffer = input.contiguous();
  auto io = std::make_shared<Contiguous>(output);
  auto landing = std::make_shared<Landing>(io->buffer);
  auto received = std::make_shared<Received>();
  const TensorView in = View(in_buffer, "all_to_all_single");
  const std::vector<int64_t> splits = input_splits;  // empty: rows / size each, as c10d's
  const std::vector<int64_t> expected =
      output_splits.empty() ? std::vector<int64_t>(static_cast<size_t>(size_), out_rows / size_)
                            : output_splits;
  Launch launch;
  launch.type = c10d::OpType::ALLTOALL_BASE;
  launch.title = "kolo:all_to_all_single";
  launch.op = "all_to_all_single";
  AddView(&Begin(&launch.signature, OpType::kAlltoall), in, true);
  launch.outputs = {output};
  launch.keep_alive = {in_buffer, io->buffer};
  if (input.is_cuda()) launch.cuda_inputs = {in_buffer, io->buffer};
  launch.finish = [landing, io, received, expected] {
    if (received->splits != expected || !landing->Fits()) {
      return InvalidArgument("all_to_all_single: the ranks sent this rank " +
                             Join(received->splits) + " rows, its output_split_sizes say " +
                             Join(expected));
    }
    return io->CopyBack();
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::alltoall_async(name, in, splits, Landing::AllocatorOf(landing), &received->splits,
                                std::move(done));
  });
}

c10::intrusive_ptr<c10d::Work> KoloBackend::alltoall(std::vector<at::Tensor>& outputs,
                                                     std::vector<at::Tensor>& inputs,
                                                     const c10d::AllToAllOptions& opts) {
  if (static_cast<int>(inputs.size()) != size_ || static_cast<int>(outputs.size()) != size_) {
    Fail("all_to_all takes " + std::to_string(size_) + " inputs and outputs, got " +
         std::to_string(inputs.size()) + " and " + std::to_string(outputs.size()));
  }
  // The inputs end to end, one element a row: rank i gets input i's elements.
  std::vector<at::Tensor> flat;
  std::vector<int64_t> splits;
  std::vector<int64_t> expected;
  int64_t out_elements = 0;
  for (int i = 0; i < size_; ++i) {
    if (inputs[i].scalar_type() != inputs[0].scalar_type() ||
        outputs[i].scalar_type() != inputs[0].scalar_type()) {
      Fail("all_to_all: the tensors' dtypes differ");
    }
    flat.push_back(inputs[i].reshape({-1}));
    splits.push_back(inputs[i].numel());
    expected.push_back(outputs[i].numel());
    out_elements += outputs[i].numel();
  }
  const at::Tensor flat_in = at::cat(flat, 0);
  auto landing = std::make_shared<Landing>(at::empty({out_elements}, flat_in.options()));
  auto received = std::make_shared<Received>();
  const TensorView in = View(flat_in, "all_to_all");
  const std::vector<at::Tensor> list = outputs;
  Launch launch;
  launch.type = c10d::OpType::ALLTOALL;
  launch.title = "kolo:all_to_all";
  launch.op = "all_to_all";
  AddView(&Begin(&launch.signature, OpType::kAlltoall), in, true);
  launch.outputs = list;
  launch.keep_alive = {flat_in};
  if (flat_in.is_cuda()) launch.cuda_inputs = {flat_in};
  launch.finish = [landing, received, expected, list] {
    if (received->splits != expected || !landing->Fits()) {
      return InvalidArgument("all_to_all: the ranks sent this rank " + Join(received->splits) +
                             " elements, its outputs hold " + Join(expected));
    }
    int64_t offset = 0;
    for (size_t i = 0; i < list.size(); ++i) {
      list[i].copy_(landing->target().narrow(0, offset, expected[i]).view(list[i].sizes()));
      offset += expected[i];
    }
    return Status::Ok();
  };
  launch.timeout = opts.timeout;
  launch.async = opts.asyncOp;
  return Issue(std::move(launch), [&](const std::string& name, Callback done) {
    return kolo::alltoall_async(name, in, splits, Landing::AllocatorOf(landing), &received->splits,
                                std::move(done));
  });
}

}  // namespace kolo::torch_ext
