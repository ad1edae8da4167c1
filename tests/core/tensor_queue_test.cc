#include "core/tensor_queue.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

using namespace kolo;

namespace {
std::unique_ptr<TensorEntry> Entry(const std::string& name) {
  auto entry = std::make_unique<TensorEntry>();
  entry->meta.name = name;
  entry->enqueued_at = std::chrono::steady_clock::now();
  return entry;
}

// What TakeNew hands out, into a fresh vector.
std::vector<TensorEntry*> Take(TensorQueue& queue) {
  std::vector<TensorEntry*> taken;
  queue.TakeNew(&taken);
  return taken;
}
}  // namespace

TEST_CASE("Entries come out of the queue in enqueue order", "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  REQUIRE(queue.Enqueue(Entry("a")).ok());
  REQUIRE(queue.Enqueue(Entry("b")).ok());
  auto taken = Take(queue);
  REQUIRE(taken.size() == 2);
  CHECK(taken[0]->meta.name == "a");
  CHECK(taken[1]->meta.name == "b");
  CHECK(Take(queue).empty());
  CHECK(queue.Find("a") == taken[0]);
}

TEST_CASE("Taking into a kept vector clears it first and hands its buffer to the queue",
          "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  std::vector<TensorEntry*> taken;
  REQUIRE(queue.Enqueue(Entry("a")).ok());
  REQUIRE(queue.Enqueue(Entry("b")).ok());
  queue.TakeNew(&taken);
  REQUIRE(taken.size() == 2);
  CHECK(taken[0]->meta.name == "a");
  CHECK(taken[1]->meta.name == "b");
  // The second take swaps the vectors back: what was taken before is not taken again.
  REQUIRE(queue.Enqueue(Entry("c")).ok());
  queue.TakeNew(&taken);
  REQUIRE(taken.size() == 1);
  CHECK(taken[0]->meta.name == "c");
  queue.TakeNew(&taken);
  CHECK(taken.empty());
  REQUIRE(queue.Enqueue(Entry("d")).ok());
  CHECK(Take(queue).size() == 1);  // a fresh vector takes from the same list
}

TEST_CASE("A name already in flight fails at enqueue until it is removed", "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  REQUIRE(queue.Enqueue(Entry("grad/w1")).ok());
  Status dup = queue.Enqueue(Entry("grad/w1"));
  REQUIRE_FALSE(dup.ok());
  CHECK(dup.code() == StatusCode::kInvalidArgument);
  CHECK_THAT(dup.message(), Catch::Contains("'grad/w1'") && Catch::Contains("already in flight"));
  Take(queue);
  REQUIRE(queue.Remove("grad/w1") != nullptr);
  CHECK(queue.Enqueue(Entry("grad/w1")).ok());
}

TEST_CASE("A closed queue refuses with the reason it was closed for", "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  REQUIRE(queue.Enqueue(Entry("x")).ok());
  queue.Close(Aborted("rank 2 lost"));
  queue.Close(ShutdownError("later reason is ignored"));
  Status refused = queue.Enqueue(Entry("y"));
  CHECK(refused.code() == StatusCode::kAborted);
  CHECK(refused.message() == "rank 2 lost");
  auto all = queue.RemoveAll();
  REQUIRE(all.size() == 1);
  CHECK(all[0]->meta.name == "x");
  CHECK(queue.Find("x") == nullptr);
}

TEST_CASE("Removing an entry not yet taken also drops it from the new list", "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  REQUIRE(queue.Enqueue(Entry("x")).ok());
  REQUIRE(queue.Remove("x") != nullptr);
  CHECK(Take(queue).empty());
  CHECK(queue.Remove("x") == nullptr);
}

TEST_CASE("Enqueue from many threads keeps every entry exactly once", "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  std::vector<std::thread> threads;
  std::atomic<int> refused{0};  // Catch2 assertions are not thread-safe: count, check later
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&queue, &refused, t] {
      for (int i = 0; i < 250; ++i) {
        if (!queue.Enqueue(Entry("t" + std::to_string(t) + "/" + std::to_string(i))).ok()) {
          ++refused;
        }
      }
    });
  }
  size_t seen = 0;
  while (seen + static_cast<size_t>(refused.load()) < 1000) {
    wakeup.WaitUntil(std::chrono::steady_clock::now() + std::chrono::milliseconds(50));
    seen += Take(queue).size();
  }
  for (auto& thread : threads) thread.join();
  CHECK(refused == 0);
  CHECK(seen == 1000);
  CHECK(queue.RemoveAll().size() == 1000);
}

TEST_CASE("A removed entry's node serves the next name, and a clash still fails at enqueue",
          "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  REQUIRE(queue.Enqueue(Entry("a long name, beyond the short-string buffer")).ok());
  REQUIRE(queue.Remove("a long name, beyond the short-string buffer") != nullptr);
  // The spare node is reused for another name: the table must find it under that name only.
  REQUIRE(queue.Enqueue(Entry("b")).ok());
  CHECK(queue.Find("b") != nullptr);
  CHECK(queue.Find("a long name, beyond the short-string buffer") == nullptr);
  REQUIRE(queue.Remove("b") != nullptr);
  REQUIRE(queue.Enqueue(Entry("c")).ok());
  // A clash through the spare node: the entry stays with the caller, the table unchanged.
  REQUIRE(queue.Remove("c") != nullptr);
  REQUIRE(queue.Enqueue(Entry("d")).ok());
  REQUIRE(queue.Enqueue(Entry("e")).ok());
  REQUIRE(queue.Remove("e") != nullptr);  // a spare node again
  auto clash = Entry("d");
  Status refused = queue.Enqueue(std::move(clash));
  CHECK(refused.code() == StatusCode::kInvalidArgument);
  CHECK(refused.message().find("named 'd' is already in flight") != std::string::npos);
  REQUIRE(clash != nullptr);
  CHECK(queue.InFlight() == 1);
  REQUIRE(queue.Enqueue(Entry("e")).ok());  // the spare node survived the clash
  CHECK(queue.Find("e") != nullptr);
  CHECK(queue.InFlight() == 2);
}

TEST_CASE("A recycled entry comes back blank and lets go of its callback at once",
          "[core][queue]") {
  Wakeup wakeup;
  TensorQueue queue(&wakeup);
  auto captured = std::make_shared<int>(7);
  std::unique_ptr<TensorEntry> entry = queue.NewEntry();
  entry->meta.name = "x";
  entry->input.shape = {4, 1024};
  entry->callback = [captured](const Status&) {};
  entry->allocate = [captured](const std::vector<int64_t>&) -> void* { return nullptr; };
  int result = 0;
  std::vector<int64_t> splits;
  entry->int_result = &result;
  entry->received_splits = &splits;
  entry->local_error = Internal("this rank's allocator failed");
  entry->in_flight = true;
  entry->trace_generation = 3;
  entry->trace_slot = 2;
  entry->trace_track = "x #3";
  TensorEntry* const address = entry.get();
  CHECK(captured.use_count() == 3);
  queue.Recycle(std::move(entry));
  CHECK(captured.use_count() == 1);  // the callback and the allocator are gone already
  std::unique_ptr<TensorEntry> again = queue.NewEntry();
  REQUIRE(again.get() == address);
  CHECK(!again->callback);
  CHECK(!again->allocate);
  CHECK(again->int_result == nullptr);
  CHECK(again->received_splits == nullptr);
  CHECK(again->local_error.ok());
  CHECK(!again->in_flight);
  CHECK(again->trace_generation == 0);
  CHECK(again->trace_slot == 0);
  CHECK(again->trace_track.empty());
  CHECK(queue.NewEntry().get() != address);  // one spare, handed out once
  queue.Recycle(nullptr);                    // ignored
}
