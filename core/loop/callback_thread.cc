#include "core/loop/callback_thread.h"

namespace kolo {
namespace {

thread_local bool tls_on_callback_thread = false;

}  // namespace

bool OnCallbackThread() {
  return tls_on_callback_thread;
}

CallbackThreadScope::CallbackThreadScope() : was_(tls_on_callback_thread) {
  tls_on_callback_thread = true;
}

CallbackThreadScope::~CallbackThreadScope() {
  tls_on_callback_thread = was_;
}

}  // namespace kolo
