#include "core/messages.h"

namespace kolo {

int64_t TensorMeta::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

bool operator==(const TensorMeta& a, const TensorMeta& b) {
  return a.signature() == b.signature() && a.name == b.name && a.shape == b.shape &&
         a.device == b.device && a.splits == b.splits && a.group == b.group &&
         a.group_size == b.group_size;
}

const char* KindName(ControllerMessage::Kind kind) {
  switch (kind) {
    case ControllerMessage::Kind::kWelcome:
      return "welcome";
    case ControllerMessage::Kind::kResponses:
      return "responses";
    case ControllerMessage::Kind::kShutdown:
      return "shutdown";
    case ControllerMessage::Kind::kAbort:
      return "abort";
    case ControllerMessage::Kind::kPong:
      return "pong";
  }
  return "unknown";
}

}  // namespace kolo
