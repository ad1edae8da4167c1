// Unit tests of kolorun's building blocks (kolo_launcher): command-line parsing, line
// reassembly, the per-rank environment and wait-status wording. No processes, no network.
#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "launcher/job_environment.h"
#include "launcher/launch_options.h"
#include "launcher/line_splitter.h"
#include "launcher/rank_process.h"

namespace kolo::launcher {
namespace {

TEST_CASE("ParseLaunchOptions takes -np and the command after it", "[tools][launcher]") {
  auto options = ParseLaunchOptions({"-np", "4", "prog", "-np", "9", "--x"});
  REQUIRE(options.ok());
  CHECK(options->num_ranks == 4);
  CHECK(options->command == std::vector<std::string>{"prog", "-np", "9", "--x"});

  auto dashed = ParseLaunchOptions({"-n", "2", "--", "-weird-name"});
  REQUIRE(dashed.ok());
  CHECK(dashed->num_ranks == 2);
  CHECK(dashed->command == std::vector<std::string>{"-weird-name"});
}

TEST_CASE("ParseLaunchOptions rejects rank counts outside 1..1024", "[tools][launcher]") {
  auto text = GENERATE(as<std::string>{}, "0", "-1", "1025", "4x", "", " 4", "99999999999999");
  auto options = ParseLaunchOptions({"-np", text, "prog"});
  REQUIRE_FALSE(options.ok());
  CHECK(options.status().code() == StatusCode::kInvalidArgument);
  CHECK(options.status().message() == "-np must be an integer in [1, 1024], got '" + text + "'");
}

TEST_CASE("ParseLaunchOptions takes --bind-to core or none, core by default", "[tools][launcher]") {
  CHECK(ParseLaunchOptions({"-np", "2", "p"})->bind_to_cores);
  CHECK(ParseLaunchOptions({"--bind-to", "core", "-np", "2", "p"})->bind_to_cores);
  CHECK_FALSE(ParseLaunchOptions({"--bind-to", "none", "-np", "2", "p"})->bind_to_cores);
  auto bad = ParseLaunchOptions({"--bind-to", "socket", "-np", "2", "p"});
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.status().message() == "--bind-to must be core or none, got 'socket'");
}

TEST_CASE("ParseLaunchOptions accepts the extremes 1 and 1024", "[tools][launcher]") {
  CHECK(ParseLaunchOptions({"-np", "1", "p"})->num_ranks == 1);
  CHECK(ParseLaunchOptions({"-np", "1024", "p"})->num_ranks == 1024);
}

TEST_CASE("ParseLaunchOptions recognises --help and --help-env", "[tools][launcher]") {
  CHECK(ParseLaunchOptions({"--help"})->show_help);
  CHECK(ParseLaunchOptions({"-h"})->show_help);
  CHECK(ParseLaunchOptions({"--help-env"})->show_env_help);
}

TEST_CASE("LineSplitter emits whole prefixed lines however the bytes arrive", "[tools][launcher]") {
  LineSplitter splitter("[3] ");
  CHECK(splitter.Feed("hel") == "");
  CHECK(splitter.Feed("lo\nwor") == "[3] hello\n");
  CHECK(splitter.Feed("ld\n\nnext") == "[3] world\n[3] \n");
  CHECK(splitter.Flush() == "[3] next\n");
  CHECK(splitter.Flush() == "");
  CHECK(splitter.Feed("") == "");
}

TEST_CASE("LineSplitter cuts a line longer than its limit into pieces", "[tools][launcher]") {
  LineSplitter splitter("[0] ", 4);
  CHECK(splitter.Feed("abcdefghij") == "[0] abcd\n[0] efgh\n");
  CHECK(splitter.Feed("\n") == "[0] ij\n");
  CHECK(splitter.Feed("wxyz") == "");  // exactly the limit: waits for the newline
  CHECK(splitter.Feed("\n") == "[0] wxyz\n");
  CHECK(splitter.Flush() == "");
}

TEST_CASE(
    "RankEnvironment sets the KOLO_, horovodrun's and torchrun's variables and overrides "
    "inherited ones",
    "[tools][launcher]") {
  JobLayout job{4, 5555, std::string(64, 'a'), "kolorun-job"};
  std::vector<std::string> env =
      RankEnvironment({"PATH=/bin", "KOLO_RANK=7", "KOLO_SECRETIVE=1", "NOEQUALS"}, 2, job);
  std::vector<std::string> expected = {"PATH=/bin",
                                       "KOLO_SECRETIVE=1",
                                       "NOEQUALS",
                                       "KOLO_RANK=2",
                                       "KOLO_SIZE=4",
                                       "KOLO_LOCAL_RANK=2",
                                       "KOLO_LOCAL_SIZE=4",
                                       "KOLO_CONTROLLER=127.0.0.1:5555",
                                       "KOLO_JOB_ID=kolorun-job",
                                       "HOROVOD_HOSTNAME=localhost",
                                       "HOROVOD_RANK=2",
                                       "HOROVOD_SIZE=4",
                                       "HOROVOD_LOCAL_RANK=2",
                                       "HOROVOD_LOCAL_SIZE=4",
                                       "HOROVOD_CROSS_RANK=0",
                                       "HOROVOD_CROSS_SIZE=1",
                                       "RANK=2",
                                       "WORLD_SIZE=4",
                                       "LOCAL_RANK=2",
                                       "LOCAL_WORLD_SIZE=4",
                                       "MASTER_ADDR=127.0.0.1",
                                       "KOLO_SECRET=" + std::string(64, 'a')};
  CHECK(env == expected);
}

TEST_CASE("MakeJobSecret returns 64 fresh hex digits", "[tools][launcher]") {
  auto a = MakeJobSecret();
  auto b = MakeJobSecret();
  REQUIRE(a.ok());
  REQUIRE(b.ok());
  CHECK(a->size() == 64);
  CHECK(a->find_first_not_of("0123456789abcdef") == std::string::npos);
  CHECK(a.value() != b.value());
}

TEST_CASE("DescribeWaitStatus and ExitCodeOf follow the shell's conventions", "[tools][launcher]") {
  int exited_3 = 3 << 8;  // the layout waitpid reports for exit(3)
  CHECK(WIFEXITED(exited_3));
  CHECK(DescribeWaitStatus(exited_3) == "exited with code 3");
  CHECK(ExitCodeOf(exited_3) == 3);
  int killed_9 = SIGKILL;
  CHECK(WIFSIGNALED(killed_9));
  CHECK(DescribeWaitStatus(killed_9) == "was killed by signal 9 (Killed)");
  CHECK(ExitCodeOf(killed_9) == 137);
}

}  // namespace
}  // namespace kolo::launcher
