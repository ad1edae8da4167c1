// KOLO_RETURN_IF_ERROR, KOLO_ASSIGN_OR_RETURN (kolo/status.h), KOLO_CHECK (core/check.h) and
// StatusOr::value() of a failed StatusOr. The aborting ones run in a forked child whose stderr
// and exit signal the parent checks, with a deadline.
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <utility>

#include "core/check.h"
#include "kolo/status.h"

using namespace kolo;

namespace {

// Counts evaluations, so that a test can tell the macros evaluate their argument once.
int evaluations = 0;

Status Fails(std::string message) {
  ++evaluations;
  return Unavailable(std::move(message));
}
Status Succeeds() {
  ++evaluations;
  return Status::Ok();
}
StatusOr<std::unique_ptr<int>> MakeInt(int value) {
  ++evaluations;
  if (value < 0) return InvalidArgument("negative: " + std::to_string(value));
  return std::make_unique<int>(value);
}
StatusOr<std::pair<int, int>> MakePair(int a, int b) {
  return std::make_pair(a, b);
}

Status TwoSteps(bool first_fails, bool second_fails, int* steps) {
  KOLO_RETURN_IF_ERROR(first_fails ? Fails("first") : Succeeds());
  ++*steps;
  KOLO_RETURN_IF_ERROR(second_fails ? Fails("second") : Succeeds());
  ++*steps;
  return Status::Ok();
}

// Declares, assigns an existing variable, and uses two in one scope (distinct temporaries).
StatusOr<int> Sum(int a, int b) {
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<int> x, MakeInt(a));
  int y = 0;
  KOLO_ASSIGN_OR_RETURN(std::unique_ptr<int> boxed_y, MakeInt(b));
  y = *boxed_y;
  KOLO_ASSIGN_OR_RETURN(auto pair, MakePair(*x, y));  // a comma inside the expression
  return pair.first + pair.second;
}

// The result of running `body` in a forked child.
struct Death {
  bool exited = false;  // returned normally (the child then exits 0)
  int signal = 0;       // the signal that ended it, 0 if none
  std::string stderr_text;
};

Death RunInChild(const std::function<void()>& body) {
  int fds[2];
  REQUIRE(pipe(fds) == 0);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], STDERR_FILENO);
    const rlimit no_core{0, 0};
    setrlimit(RLIMIT_CORE, &no_core);  // an expected abort need not write a core file
    body();
    _exit(0);
  }
  close(fds[1]);
  Death death;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool eof = false;
  while (!eof) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd p{fds[0], POLLIN, 0};
    if (poll(&p, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = read(fds[0], buf, sizeof(buf));
    if (n > 0) {
      death.stderr_text.append(buf, static_cast<size_t>(n));
    } else {
      eof = true;
    }
  }
  close(fds[0]);
  if (!eof) kill(pid, SIGKILL);  // a hung child: the checks below fail and say so
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("the child's stderr: " << death.stderr_text);
  REQUIRE(eof);
  death.exited = WIFEXITED(status) && WEXITSTATUS(status) == 0;
  death.signal = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  return death;
}

}  // namespace

TEST_CASE("KOLO_RETURN_IF_ERROR returns the first error and goes on past OK statuses",
          "[core][status]") {
  int steps = 0;
  evaluations = 0;
  CHECK(TwoSteps(false, false, &steps).ok());
  CHECK(steps == 2);
  CHECK(evaluations == 2);

  steps = 0;
  Status failed = TwoSteps(false, true, &steps);
  CHECK(failed == Unavailable("second"));
  CHECK(steps == 1);

  steps = 0;
  evaluations = 0;
  failed = TwoSteps(true, false, &steps);
  CHECK(failed == Unavailable("first"));
  CHECK(steps == 0);
  CHECK(evaluations == 1);
}

TEST_CASE("KOLO_ASSIGN_OR_RETURN assigns the value or returns the error", "[core][status]") {
  evaluations = 0;
  StatusOr<int> sum = Sum(2, 3);
  REQUIRE(sum.ok());
  CHECK(*sum == 5);
  CHECK(evaluations == 2);  // each expression once

  evaluations = 0;
  sum = Sum(-1, 3);
  CHECK(sum.status() == InvalidArgument("negative: -1"));
  CHECK(evaluations == 1);  // returned before the second

  sum = Sum(1, -7);
  CHECK(sum.status() == InvalidArgument("negative: -7"));
}

TEST_CASE("KOLO_CHECK does nothing when its condition holds", "[core][check]") {
  int message_evaluations = 0;
  auto counted = [&] { return ++message_evaluations; };
  KOLO_CHECK(1 + 1 == 2) << "never printed " << counted();
  CHECK(message_evaluations == 0);  // the message is only built on failure

  const Death death = RunInChild([] { KOLO_CHECK(true) << "fine"; });
  CHECK(death.exited);
  CHECK(death.stderr_text.empty());
}

TEST_CASE("KOLO_CHECK prints where, what and why, then aborts", "[core][check]") {
  const Death death = RunInChild([] {
    const int rank = 3;
    KOLO_CHECK(rank < 2) << "rank " << rank << " of " << 2;
  });
  CHECK(death.signal == SIGABRT);
  CHECK_FALSE(death.exited);
  CHECK_THAT(death.stderr_text, Catch::StartsWith("kolo: ") &&
                                    Catch::Contains("status_macros_test.cc:") &&
                                    Catch::EndsWith("check failed: rank < 2: rank 3 of 2\n"));
}

TEST_CASE("KOLO_CHECK without a message names the condition", "[core][check]") {
  const Death death = RunInChild([] {
    const char* p = nullptr;
    KOLO_CHECK(p != nullptr);
  });
  CHECK(death.signal == SIGABRT);
  CHECK_THAT(death.stderr_text, Catch::EndsWith("check failed: p != nullptr\n"));
}

TEST_CASE("value() of a failed StatusOr aborts and prints the status", "[core][status]") {
  const Death death = RunInChild([] {
    StatusOr<int> failed = DeadlineExceeded("no Welcome from the controller");
    std::printf("%d\n", failed.value());
  });
  CHECK(death.signal == SIGABRT);
  CHECK(death.stderr_text ==
        "kolo: value() of a failed StatusOr: DEADLINE_EXCEEDED: no Welcome from the controller\n");
}
