// Fusion layouts: where the tensors of one response lie in a fused buffer, written once for
// every executor (the CPU executor's host buffer, ops/cpu_executor_rows.cc; the GPU executor's
// device buffer, ops/gpu/gpu_executor_ops.cc), so that the ranks' blocks mean the same on
// every path. The gathering and scattering ops are rank-major: rank r's block holds every
// tensor's part for r, in the response's order, so a ring or NCCL moves whole blocks. Each
// layout says where every piece lies, so the executors only copy (packing the fused buffer
// before the collective, unpacking it after).
//
// Pure functions and value types; no threads, no I/O.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/messages.h"
#include "core/tensor_entry.h"
#include "kolo/status.h"

namespace kolo {

// A (fused) allgather. The gathered buffer is rank-major: rank r's block holds every tensor's
// rows from rank r; tensor t's output holds its rows from rank 0, 1, ... in turn. For one
// tensor the buffer is the output itself.
class AllgatherLayout {
 public:
  // Tensor t's rows from rank r: `bytes` at `buffer_offset` in the gathered buffer and at
  // `output_offset` in tensor t's output. A rank may send no rows (bytes 0).
  struct Piece {
    size_t buffer_offset = 0;
    size_t output_offset = 0;
    size_t bytes = 0;
  };

  // From the response's first dimensions (first_dims[t * n + r]: tensor t's rows from rank r)
  // and this rank's entries. Internal error when first_dims is not one row of `n` per entry,
  // or when an entry's input is not what the response says rank `rank` sends (naming it).
  static StatusOr<AllgatherLayout> Of(const Response& response,
                                      const std::vector<TensorEntry*>& entries, int rank, int n);

  size_t tensors() const { return output_shapes_.size(); }
  // The gathered buffer's size: every block, back to back.
  size_t total_bytes() const { return total_bytes_; }
  // By rank: the bytes of every tensor's rows from that rank.
  const std::vector<size_t>& block_bytes() const { return block_bytes_; }
  // Where this rank's own block starts in the gathered buffer.
  size_t own_offset() const { return own_offset_; }
  const Piece& piece(size_t t, int r) const {
    return pieces_[static_cast<size_t>(r) * tensors() + t];
  }
  // Tensor t's output: its input's shape with dimension 0 the rows of every rank.
  const std::vector<int64_t>& output_shape(size_t t) const { return output_shapes_[t]; }

 private:
  std::vector<Piece> pieces_;  // rank-major: pieces_[r * tensors + t]
  std::vector<size_t> block_bytes_;
  std::vector<std::vector<int64_t>> output_shapes_;
  size_t total_bytes_ = 0;
  size_t own_offset_ = 0;
};

// A (fused) reducescatter: how it splits over `n` ranks, the same on every data plane.
// parts[t * n + r] is the number of elements of tensor t that rank r receives (whole rows,
// SplitRows of core/op_validation.h), block_elements[r] their sum over the tensors. Rank r's
// block holds part r of every tensor, in order (the CPU executor packs the blocks back to back,
// the GPU executor pads each to the largest, as NCCL needs).
struct ReducescatterLayout {
  std::vector<size_t> parts;
  std::vector<size_t> block_elements;

  // Every block's elements: the fused buffer's size when packed (ReducescatterPacking::Packed).
  size_t total_elements() const;
};
// Internal error, naming the tensor, when an entry's output is not rank `rank`'s part or an
// entry's dtype is not `dtype`.
StatusOr<ReducescatterLayout> LayOutReducescatter(const std::vector<TensorEntry*>& entries,
                                                  DataType dtype, int rank, int n);

// Where a fused reducescatter's parts lie in its buffer, in elements: what the executors copy
// in before the reduction (every part) and out after it (this rank's). The blocks lie one after
// another in a given order (the rank whose block lies i-th: rank order, or the hierarchical
// path's place-major order, ops/hierarchical_reducescatter.h); rank r's block holds part r of
// every tensor in the response's order. Packed: the blocks back to back (the CPU executor).
// Padded: every block as long as the largest, so that all are one size as NCCL needs (the GPU
// executor; the padding is reduced and dropped).
class ReducescatterPacking {
 public:
  // Tensor `tensor`'s part for rank `rank`: `elements` at `input_offset` in the tensor's input
  // (after the parts of the ranks before `rank`) and at `buffer_offset` in the fused buffer.
  struct Piece {
    size_t tensor = 0;
    int rank = 0;
    size_t input_offset = 0;
    size_t buffer_offset = 0;
    size_t elements = 0;
  };

  // `order`: the ranks in the order their blocks lie (a permutation of 0..n-1); null: rank
  // order.
  static ReducescatterPacking Packed(const ReducescatterLayout& layout,
                                     const std::vector<int>* order);
  // In rank order.
  static ReducescatterPacking Padded(const ReducescatterLayout& layout);

  // Every part, in buffer order: block by block, each block's tensors in the response's order.
  const std::vector<Piece>& pieces() const { return pieces_; }
  // Tensor t's part for rank r.
  const Piece& piece(size_t t, int r) const {
    return pieces_[block_first_[static_cast<size_t>(r)] + t];
  }
  // Where rank r's block starts.
  size_t block_offset(int r) const { return block_offset_[static_cast<size_t>(r)]; }
  // The fused buffer's size, padding included.
  size_t total_elements() const { return total_elements_; }

 private:
  ReducescatterPacking(const ReducescatterLayout& layout, const std::vector<int>* order,
                       bool padded);

  std::vector<Piece> pieces_;  // in buffer order
  // By rank: the index in pieces_ of its block's first part, and where the block starts.
  std::vector<size_t> block_first_;
  std::vector<size_t> block_offset_;
  size_t total_elements_ = 0;
};

}  // namespace kolo
