#include "python/csrc/c10d/landing.h"

#include "kolo/types.h"

namespace kolo::torch_ext {

Allocator Landing::AllocatorOf(const std::shared_ptr<Landing>& landing) {
  return [landing](const std::vector<int64_t>& shape) { return landing->Allocate(shape); };
}

void* Landing::Allocate(const std::vector<int64_t>& shape) {
  int64_t elements = 1;
  for (int64_t d : shape) elements *= d;
  std::lock_guard<std::mutex> lock(mu_);
  shape_ = shape;
  try {
    arrived_ = elements == target_.numel() ? target_ : at::empty(shape, target_.options());
  } catch (const std::exception&) {
    return nullptr;  // kolo fails the op on this rank (no memory); nothing may throw here
  }
  return arrived_.data_ptr();
}

bool Landing::Fits() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_.defined() && arrived_.is_same(target_);
}

at::Tensor Landing::Arrived() const {
  std::lock_guard<std::mutex> lock(mu_);
  return arrived_;
}

std::string Landing::ArrivedShape() const {
  std::lock_guard<std::mutex> lock(mu_);
  return ShapeToString(shape_);
}

}  // namespace kolo::torch_ext
