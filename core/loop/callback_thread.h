// Which threads run kolo's callbacks: the background loop's own thread, a blocking caller while
// it drives the loop (BackgroundLoop::Drive), and an executor's completion thread while it
// completes ops (AsyncOps). Blocking kolo calls refuse on such a thread, since it would wait on
// itself. A thread-local flag.
//
// Threading: each thread sees and sets its own flag.
#pragma once

namespace kolo {

// True on a thread that runs kolo callbacks now.
bool OnCallbackThread();

// Marks the calling thread as one that runs kolo callbacks for this object's lifetime, then
// restores what it was.
class CallbackThreadScope {
 public:
  CallbackThreadScope();
  ~CallbackThreadScope();
  CallbackThreadScope(const CallbackThreadScope&) = delete;
  CallbackThreadScope& operator=(const CallbackThreadScope&) = delete;

 private:
  const bool was_;
};

}  // namespace kolo
