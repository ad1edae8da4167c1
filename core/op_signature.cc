#include "core/op_signature.h"

#include <functional>

namespace kolo {

size_t OpSignatureHash::operator()(const OpSignature& s) const {
  size_t hash = 0;
  auto mix = [&hash](size_t value) {
    hash ^= value + 0x9e3779b97f4a7c15ull + (hash << 6) + (hash >> 2);
  };
  mix(std::hash<int32_t>()(static_cast<int32_t>(s.op)));
  mix(std::hash<int32_t>()(static_cast<int32_t>(s.dtype)));
  mix(std::hash<int32_t>()(static_cast<int32_t>(s.reduce_op)));
  mix(std::hash<double>()(s.prescale));
  mix(std::hash<double>()(s.postscale));
  mix(std::hash<int>()(s.root));
  mix(std::hash<int>()(s.process_set));
  return hash;
}

}  // namespace kolo
