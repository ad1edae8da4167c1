#include "core/fusion/fusion_layout.h"

#include <algorithm>
#include <string>

#include "core/op_validation.h"

namespace kolo {

StatusOr<AllgatherLayout> AllgatherLayout::Of(const Response& response,
                                              const std::vector<TensorEntry*>& entries, int rank,
                                              int n) {
  const size_t tensors = entries.size();
  if (tensors == 0 || response.first_dims.size() != tensors * n) {
    return Internal("expected " + std::to_string(n) + " first dimensions for each of " +
                    std::to_string(tensors) + " tensors, got " +
                    std::to_string(response.first_dims.size()));
  }
  auto rows = [&](size_t t, int r) { return response.first_dims[t * n + r]; };
  AllgatherLayout layout;
  layout.pieces_.resize(tensors * n);
  layout.block_bytes_.assign(n, 0);
  layout.output_shapes_.resize(tensors);
  for (size_t t = 0; t < tensors; ++t) {
    const TensorEntry& entry = *entries[t];
    const std::vector<int64_t>& in_shape = entry.input.shape;
    if (in_shape.empty() || in_shape[0] != rows(t, rank) || entry.input.dtype != response.dtype) {
      return Internal("this rank's input '" + entry.meta.name + "' does not match the decision");
    }
    size_t row_bytes = DataTypeSize(response.dtype);
    for (size_t d = 1; d < in_shape.size(); ++d) row_bytes *= static_cast<size_t>(in_shape[d]);
    std::vector<int64_t>& out_shape = layout.output_shapes_[t];
    out_shape = in_shape;
    out_shape[0] = 0;
    size_t output_offset = 0;
    for (int r = 0; r < n; ++r) {
      Piece& piece = layout.pieces_[static_cast<size_t>(r) * tensors + t];
      piece.bytes = static_cast<size_t>(rows(t, r)) * row_bytes;
      piece.output_offset = output_offset;
      output_offset += piece.bytes;
      layout.block_bytes_[r] += piece.bytes;
      out_shape[0] += rows(t, r);
    }
  }
  // Each block, back to back; within it each tensor's rows, in the response's order.
  for (int r = 0; r < n; ++r) {
    if (r == rank) layout.own_offset_ = layout.total_bytes_;
    size_t offset = layout.total_bytes_;
    for (size_t t = 0; t < tensors; ++t) {
      Piece& piece = layout.pieces_[static_cast<size_t>(r) * tensors + t];
      piece.buffer_offset = offset;
      offset += piece.bytes;
    }
    layout.total_bytes_ += layout.block_bytes_[r];
  }
  return layout;
}

StatusOr<ReducescatterLayout> LayOutReducescatter(const std::vector<TensorEntry*>& entries,
                                                  DataType dtype, int rank, int n) {
  ReducescatterLayout layout;
  layout.parts.resize(entries.size() * n);
  layout.block_elements.assign(n, 0);
  for (size_t t = 0; t < entries.size(); ++t) {
    const TensorEntry& entry = *entries[t];
    const std::vector<int64_t>& shape = entry.input.shape;
    const int64_t rows = shape.empty() ? 1 : shape[0];
    const int64_t row_elements = rows == 0 ? 0 : entry.input.num_elements() / rows;
    const std::vector<int64_t> split = SplitRows(rows, n);
    for (int r = 0; r < n; ++r) {
      layout.parts[t * n + r] = static_cast<size_t>(split[r] * row_elements);
      layout.block_elements[r] += layout.parts[t * n + r];
    }
    if (entry.output.num_elements() != static_cast<int64_t>(layout.parts[t * n + rank]) ||
        entry.input.dtype != dtype || entry.output.dtype != dtype) {
      return Internal("the output of '" + entry.meta.name + "' does not match this rank's part");
    }
  }
  return layout;
}

size_t ReducescatterLayout::total_elements() const {
  size_t total = 0;
  for (size_t count : block_elements) total += count;
  return total;
}

ReducescatterPacking ReducescatterPacking::Packed(const ReducescatterLayout& layout,
                                                  const std::vector<int>* order) {
  return ReducescatterPacking(layout, order, /*padded=*/false);
}

ReducescatterPacking ReducescatterPacking::Padded(const ReducescatterLayout& layout) {
  return ReducescatterPacking(layout, nullptr, /*padded=*/true);
}

ReducescatterPacking::ReducescatterPacking(const ReducescatterLayout& layout,
                                           const std::vector<int>* order, bool padded) {
  const size_t n = layout.block_elements.size();
  const size_t tensors = n == 0 ? 0 : layout.parts.size() / n;
  const size_t largest =
      n == 0 ? 0 : *std::max_element(layout.block_elements.begin(), layout.block_elements.end());
  pieces_.reserve(tensors * n);
  block_first_.assign(n, 0);
  block_offset_.assign(n, 0);
  // Where each tensor's part for rank r starts in its input: after the parts of ranks < r.
  std::vector<size_t> input_offset(tensors * n, 0);
  for (size_t t = 0; t < tensors; ++t) {
    for (size_t r = 1; r < n; ++r) {
      input_offset[t * n + r] = input_offset[t * n + r - 1] + layout.parts[t * n + r - 1];
    }
  }
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const int r = order != nullptr ? (*order)[i] : static_cast<int>(i);
    const size_t block_start = offset;
    block_first_[static_cast<size_t>(r)] = pieces_.size();
    block_offset_[static_cast<size_t>(r)] = offset;
    for (size_t t = 0; t < tensors; ++t) {
      const size_t part = t * n + static_cast<size_t>(r);
      pieces_.push_back(Piece{t, r, input_offset[part], offset, layout.parts[part]});
      offset += layout.parts[part];
    }
    if (padded) offset = block_start + largest;
  }
  total_elements_ = offset;
}

}  // namespace kolo
