// Unit tests of kolorun's multi-host planning (kolo_launcher): -H and hostfile parsing, rank
// placement, the controller's host, shell quoting and the per-rank launch plan that --dry-run
// prints. No processes, no network.
#include <algorithm>
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "launcher/host_list.h"
#include "launcher/job_plan.h"
#include "launcher/launch_options.h"
#include "launcher/rank_placement.h"
#include "launcher/remote_command.h"

namespace kolo::launcher {
namespace {

std::string Value(const std::vector<EnvVar>& vars, const std::string& name) {
  for (const auto& [key, value] : vars) {
    if (key == name) return value;
  }
  return "(unset)";
}

TEST_CASE("ParseHostList reads names, addresses and slots, merging repeated hosts",
          "[tools][kolorun]") {
  auto hosts = ParseHostList("node1:4,node2,ns1=10.0.0.1:2,node1:2,v6=[fe80::1]:3");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 4);
  CHECK((*hosts)[0].name == "node1");
  CHECK((*hosts)[0].slots == 6);
  CHECK((*hosts)[1].name == "node2");
  CHECK((*hosts)[1].slots == 1);
  CHECK((*hosts)[1].Reachable() == "node2");
  CHECK((*hosts)[2].name == "ns1");
  CHECK((*hosts)[2].address == "10.0.0.1");
  CHECK((*hosts)[2].slots == 2);
  CHECK((*hosts)[3].address == "[fe80::1]");
  CHECK((*hosts)[3].slots == 3);
  CHECK(TotalSlots(*hosts) == 12);
}

TEST_CASE("ParseHostList names the bad entry", "[tools][kolorun]") {
  using Case = std::pair<std::string, std::string>;
  auto [text, message] =
      GENERATE(Case{"a:0", "slots must be an integer"}, Case{"a:x", "got 'x'"},
               Case{"a,,b", "empty host entry"}, Case{"", "empty host entry"},
               Case{"a b:2", "not a host name"}, Case{"a=:2", "not an address"},
               Case{"-a:1", "not a host name"}, Case{"a=1.2.3.4,a=5.6.7.8", "different addresses"});
  auto hosts = ParseHostList(text);
  REQUIRE_FALSE(hosts.ok());
  CHECK(hosts.status().code() == StatusCode::kInvalidArgument);
  CHECK_THAT(hosts.status().message(), Catch::Contains(message));
}

TEST_CASE("ParseHostfile reads Open MPI hostfiles with comments and blank lines",
          "[tools][kolorun]") {
  const std::string text =
      "# the cluster\n"
      "\n"
      "node1 slots=4   # fast one\n"
      "  node2 slots=2 max_slots=8\n"
      "node3\n"
      "ns1 slots=2 address=10.0.0.1\n"
      "node2 count=1\n";
  auto hosts = ParseHostfile(text, "hosts.txt");
  REQUIRE(hosts.ok());
  REQUIRE(hosts->size() == 4);
  CHECK((*hosts)[0].slots == 4);
  CHECK((*hosts)[1].name == "node2");
  CHECK((*hosts)[1].slots == 3);
  CHECK((*hosts)[2].slots == 1);
  CHECK((*hosts)[3].Reachable() == "10.0.0.1");
}

TEST_CASE("ParseHostfile errors name the file and the line", "[tools][kolorun]") {
  using Case = std::pair<std::string, std::string>;
  auto [text, message] =
      GENERATE(Case{"a slots=2\nb slots=two\n", "h:2: slots must be an integer"},
               Case{"a\n\n# c\nb cpus=3\n", "h:4: unknown keyword 'cpus=3'"},
               Case{"a slots=0\n", "h:1: slots"}, Case{"# nothing\n\n", "h: no hosts"},
               Case{"a address=x y\n", "h:1: unknown keyword 'y'"});
  auto hosts = ParseHostfile(text, "h");
  REQUIRE_FALSE(hosts.ok());
  CHECK_THAT(hosts.status().message(), Catch::StartsWith(message));
}

TEST_CASE("PlaceRanks fills each host's slots in order", "[tools][kolorun]") {
  std::vector<Host> hosts = {{"a", "", 2}, {"b", "", 3}, {"c", "", 4}};
  auto placed = PlaceRanks(hosts, 6);
  REQUIRE(placed.ok());
  REQUIRE(placed->size() == 6);
  // rank: host, local rank, local size, cross rank
  const int expected[6][4] = {{0, 0, 2, 0}, {0, 1, 2, 0}, {1, 0, 3, 1},
                              {1, 1, 3, 1}, {1, 2, 3, 1}, {2, 0, 1, 2}};
  for (int r = 0; r < 6; ++r) {
    const RankPlacement& p = (*placed)[static_cast<size_t>(r)];
    INFO("rank " << r);
    CHECK(p.rank == r);
    CHECK(p.host_index == expected[r][0]);
    CHECK(p.local_rank == expected[r][1]);
    CHECK(p.local_size == expected[r][2]);
    CHECK(p.cross_rank == expected[r][3]);
  }
  CHECK(PlaceRanks(hosts, 0)->size() == 9);  // one per slot
  CHECK(PlaceRanks(hosts, 2)->back().host_index == 0);
  auto too_many = PlaceRanks(hosts, 10);
  REQUIRE_FALSE(too_many.ok());
  CHECK_THAT(too_many.status().message(), Catch::Contains("only 9"));
}

TEST_CASE("ParseLaunchOptions takes host lists and the multi-host options", "[tools][kolorun]") {
  auto options = ParseLaunchOptions({"-H", "a:2,b:2", "--launch-cmd", "ip netns exec {host}", "-p",
                                     "2222", "-i", "/k", "-x", "FOO", "--start-timeout", "7.5",
                                     "--output-dir", "/tmp/o", "--dry-run", "prog", "-p"});
  REQUIRE(options.ok());
  CHECK(options->num_ranks == 4);  // one per slot
  CHECK(options->hosts.size() == 2);
  CHECK(options->launch_template == "ip netns exec {host}");
  CHECK(options->ssh.port == 2222);
  CHECK(options->ssh.identity == "/k");
  CHECK(options->forward_env == std::vector<std::string>{"FOO"});
  CHECK(options->start_timeout == "7.5");
  CHECK(options->output_dir == "/tmp/o");
  CHECK(options->dry_run);
  CHECK(options->command == std::vector<std::string>{"prog", "-p"});

  CHECK(ParseLaunchOptions({"-np", "3", "-H", "a:4", "p"})->num_ranks == 3);
  CHECK_THAT(ParseLaunchOptions({"-H", "a", "--hostfile", "f", "p"}).status().message(),
             Catch::Contains("one host list"));
  CHECK_THAT(ParseLaunchOptions({"-np", "2", "--start-timeout", "0", "p"}).status().message(),
             Catch::Contains("--start-timeout must be"));
  CHECK_THAT(ParseLaunchOptions({"-np", "2", "-p", "70000", "p"}).status().message(),
             Catch::Contains("-p must be a port"));
  CHECK_THAT(ParseLaunchOptions({"--hostfile", "/nonexistent/hosts", "p"}).status().message(),
             Catch::Contains("cannot read hostfile '/nonexistent/hosts'"));
}

TEST_CASE("ShellQuote makes any text one shell word", "[tools][kolorun]") {
  CHECK(ShellQuote("plain/path-1.2") == "plain/path-1.2");
  CHECK(ShellQuote("") == "''");
  CHECK(ShellQuote("a b") == "'a b'");
  CHECK(ShellQuote("it's $HOME") == "'it'\\''s $HOME'");
  CHECK(ShellJoin({"echo", "a b", "c"}) == "echo 'a b' c");
  CHECK(SubstituteTemplate("ip netns exec {host} # {addr}", Host{"ns 1", "10.0.0.1", 1}) ==
        "ip netns exec 'ns 1' # 10.0.0.1");
}

LaunchOptions Options(const std::string& hosts, std::vector<std::string> command) {
  LaunchOptions parsed;
  parsed.hosts = ParseHostList(hosts).value();
  parsed.num_ranks = TotalSlots(parsed.hosts);
  parsed.command = std::move(command);
  return parsed;
}

PlanContext Context() {
  PlanContext context;
  context.base_env = {"PATH=/bin",  "KOLO_LOG_LEVEL=info", "KOLO_SECRET=stale",
                      "HOME=/root", "KOLO_RANK=9",         "KOLO_DATA_ADDR=10.0.0.9"};
  context.this_host = "head.example.org";
  context.working_dir = "/work dir";
  return context;
}

JobLayout Job(int size) {
  JobLayout job{size, 4242, std::string(64, 'c'), "kolorun-test"};
  return job;
}

TEST_CASE("ControllerHost is loopback for local jobs and the first host otherwise",
          "[tools][kolorun]") {
  PlanContext context = Context();
  LaunchOptions local;
  local.num_ranks = 2;
  CHECK(ControllerHost(local, context) == "127.0.0.1");
  CHECK(ControllerHost(Options("localhost:2,head:2", {"p"}), context) == "127.0.0.1");
  CHECK(ControllerHost(Options("node1:2,node2:2", {"p"}), context) == "node1");
  CHECK(ControllerHost(Options("localhost:2,node2:2", {"p"}), context) == "head.example.org");
  CHECK(ControllerHost(Options("ns1=10.9.0.1:2,ns2=10.9.0.2:2", {"p"}), context) == "10.9.0.1");
  LaunchOptions templated = Options("ns1:2,ns2:2", {"p"});
  templated.launch_template = "ip netns exec {host}";
  CHECK(ControllerHost(templated, context) == "ns1");
}

TEST_CASE("PlanJob starts this host's ranks directly and others over ssh with the secret on stdin",
          "[tools][kolorun]") {
  LaunchOptions options = Options("localhost:2,node2:1", {"train", "--lr", "0.1 x"});
  options.ssh.port = 2222;
  JobLayout job = Job(3);
  job.controller_host = "head.example.org";
  auto plan = PlanJob(options, job, Context());
  REQUIRE(plan.ok());
  REQUIRE(plan->size() == 3);

  const RankLaunch& local = (*plan)[1];
  CHECK(local.path == LaunchPath::kLocal);
  CHECK(local.argv == std::vector<std::string>{"train", "--lr", "0.1 x"});
  CHECK(local.stdin_data.empty());
  CHECK(Value(local.rank_vars, "KOLO_LOCAL_RANK") == "1");
  CHECK(Value(local.rank_vars, "KOLO_HOSTNAME") == "localhost");
  // horovodrun's variables: the cross communicator holds the ranks of one local rank, one per
  // host (ranks 0 and 2 here; rank 1 is alone in its).
  const std::vector<std::vector<std::string>> horovod = {
      {"0", "0", "2", "localhost"}, {"1", "0", "1", "localhost"}, {"0", "1", "2", "node2"}};
  for (size_t r = 0; r < 3; ++r) {
    const std::vector<EnvVar>& vars = (*plan)[r].rank_vars;
    CHECK(Value(vars, "HOROVOD_RANK") == std::to_string(r));
    CHECK(Value(vars, "HOROVOD_SIZE") == "3");
    CHECK(Value(vars, "HOROVOD_LOCAL_RANK") == horovod[r][0]);
    CHECK(Value(vars, "HOROVOD_CROSS_RANK") == horovod[r][1]);
    CHECK(Value(vars, "HOROVOD_CROSS_SIZE") == horovod[r][2]);
    CHECK(Value(vars, "HOROVOD_HOSTNAME") == horovod[r][3]);
  }
  CHECK(std::count(local.env.begin(), local.env.end(), "KOLO_SECRET=" + job.secret) == 1);
  CHECK(std::count(local.env.begin(), local.env.end(), "KOLO_SECRET=stale") == 0);
  CHECK(std::count(local.env.begin(), local.env.end(), "KOLO_RANK=1") == 1);

  const RankLaunch& remote = (*plan)[2];
  CHECK(remote.path == LaunchPath::kSsh);
  CHECK(remote.host == "node2");
  CHECK(remote.stdin_data == job.secret + "\n");
  REQUIRE(remote.argv.size() == 8);
  CHECK(std::vector<std::string>(remote.argv.begin(), remote.argv.begin() + 7) ==
        std::vector<std::string>{"ssh", "-o", "BatchMode=yes", "-p", "2222", "--", "node2"});
  const std::string& script = remote.argv[7];
  CHECK_THAT(script, Catch::StartsWith("sh -c '"));
  CHECK_THAT(script, Catch::Contains("KOLO_RANK=2"));
  CHECK_THAT(script, Catch::Contains("KOLO_LOCAL_RANK=0"));
  CHECK_THAT(script, Catch::Contains("HOROVOD_CROSS_RANK=1"));
  CHECK_THAT(script, Catch::Contains("KOLO_CONTROLLER=head.example.org:4242"));
  CHECK_THAT(script, Catch::Contains("KOLO_LOG_LEVEL=info"));  // configuration travels along
  CHECK_THAT(script, !Catch::Contains("HOME="));               // the rest of the env does not
  CHECK_THAT(script, !Catch::Contains("KOLO_DATA_ADDR"));      // nor this host's address
  for (const std::string& word : remote.argv) CHECK(word.find(job.secret) == std::string::npos);
  for (const std::string& entry : remote.env) CHECK(entry.find(job.secret) == std::string::npos);
  CHECK(Value(remote.rank_vars, "KOLO_SECRET") == "(unset)");
}

TEST_CASE("PlanJob binds the ranks it starts here to disjoint blocks of its CPUs",
          "[tools][kolorun]") {
  PlanContext context = Context();
  context.cpus = {0, 1, 2, 3, 5};
  auto plan = PlanJob(Options("localhost:2,node2:1", {"p"}), Job(3), context);
  REQUIRE(plan.ok());
  CHECK((*plan)[0].cpus == std::vector<int>{0, 1});
  CHECK((*plan)[1].cpus == std::vector<int>{2, 3});  // 5 CPUs, 2 blocks of 2: CPU 5 unused
  for (int r : {0, 1}) {
    const RankLaunch& local = (*plan)[r];
    CHECK(Value(local.rank_vars, "KOLO_CPU_BIND") == "core");
    CHECK(std::count(local.env.begin(), local.env.end(), "KOLO_CPU_BIND=core") == 1);
  }
  CHECK((*plan)[2].cpus.empty());  // over ssh: the remote host's placement is its own
  CHECK(Value((*plan)[2].rank_vars, "KOLO_CPU_BIND") == "(unset)");
  CHECK_THAT(FormatPlan(*plan), Catch::Contains("bound to CPUs: 2,3"));

  // Nobody is bound with --bind-to none, more ranks here than CPUs, one rank, or a template.
  LaunchOptions none = Options("localhost:2", {"p"});
  none.bind_to_cores = false;
  LaunchOptions crowded = Options("localhost:6", {"p"});
  LaunchOptions single = Options("localhost:1", {"p"});
  LaunchOptions templated = Options("localhost:2", {"p"});
  templated.launch_template = "ip netns exec {host}";
  for (const LaunchOptions& options : {none, crowded, single, templated}) {
    auto unbound = PlanJob(options, Job(options.num_ranks), context);
    REQUIRE(unbound.ok());
    for (const RankLaunch& launch : *unbound) {
      CHECK(launch.cpus.empty());
      CHECK(Value(launch.rank_vars, "KOLO_CPU_BIND") == "(unset)");
    }
  }
}

TEST_CASE("PlanJob gives unbound ranks sharing this host a share of its CPUs as threads",
          "[tools][kolorun]") {
  // torch and OpenMP start a thread per CPU each: unbound ranks get an equal share, as under
  // torchrun, unless the user chose (OMP_NUM_THREADS set); bound ranks see their block only.
  PlanContext context = Context();
  context.cpus = {0, 1, 2, 3, 4};
  LaunchOptions none = Options("localhost:2,node2:1", {"p"});
  none.bind_to_cores = false;
  auto plan = PlanJob(none, Job(3), context);
  REQUIRE(plan.ok());
  CHECK(Value((*plan)[0].rank_vars, "OMP_NUM_THREADS") == "2");
  CHECK(Value((*plan)[1].rank_vars, "OMP_NUM_THREADS") == "2");
  CHECK(Value((*plan)[2].rank_vars, "OMP_NUM_THREADS") == "(unset)");  // another host's CPUs

  auto crowded = PlanJob(Options("localhost:8", {"p"}), Job(8), context);
  REQUIRE(crowded.ok());
  for (const RankLaunch& launch : *crowded) {
    CHECK(Value(launch.rank_vars, "OMP_NUM_THREADS") == "1");
  }

  PlanContext chosen = context;
  chosen.base_env.push_back("OMP_NUM_THREADS=3");
  auto kept = PlanJob(none, Job(3), chosen);
  REQUIRE(kept.ok());
  CHECK(Value((*kept)[0].rank_vars, "OMP_NUM_THREADS") == "(unset)");  // kolorun's env passes

  auto bound = PlanJob(Options("localhost:2", {"p"}), Job(2), context);
  REQUIRE(bound.ok());
  CHECK(Value((*bound)[0].rank_vars, "OMP_NUM_THREADS") == "(unset)");
  auto single = PlanJob(Options("localhost:1", {"p"}), Job(1), context);
  REQUIRE(single.ok());
  CHECK(Value((*single)[0].rank_vars, "OMP_NUM_THREADS") == "(unset)");
}

TEST_CASE("PlanJob prefixes the launch template and refuses unset -x variables",
          "[tools][kolorun]") {
  LaunchOptions options = Options("ns1=10.1.0.1:1,ns2=10.1.0.2:1", {"prog", "a b"});
  options.launch_template = "ip netns exec {host}";
  auto plan = PlanJob(options, Job(2), Context());
  REQUIRE(plan.ok());
  CHECK((*plan)[1].path == LaunchPath::kTemplate);
  CHECK((*plan)[1].argv ==
        std::vector<std::string>{"/bin/sh", "-c", "ip netns exec ns2 prog 'a b'"});
  CHECK(Value((*plan)[1].rank_vars, "KOLO_HOSTNAME") == "ns2");

  LaunchOptions remote = Options("far:1", {"p"});
  remote.forward_env = {"NOT_SET_ANYWHERE"};
  auto refused = PlanJob(remote, Job(1), Context());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(refused.status().message(), Catch::Contains("-x NOT_SET_ANYWHERE"));
}

TEST_CASE("FormatPlan prints each rank's host, command and variables but not the secret",
          "[tools][kolorun]") {
  LaunchOptions options = Options("ns1=10.1.0.1:2,ns2=10.1.0.2:1", {"prog"});
  options.launch_template = "ip netns exec {host}";
  JobLayout job = Job(3);
  job.controller_host = "10.1.0.1";
  job.start_timeout_seconds = "20";
  std::string text = FormatPlan(PlanJob(options, job, Context()).value());
  CHECK_THAT(text, Catch::Contains("rank 2: host ns2, started through --launch-cmd\n"
                                   "  command: /bin/sh -c 'ip netns exec ns2 prog'\n"
                                   "  env: KOLO_RANK=2\n"
                                   "  env: KOLO_SIZE=3\n"
                                   "  env: KOLO_LOCAL_RANK=0\n"
                                   "  env: KOLO_LOCAL_SIZE=1\n"
                                   "  env: KOLO_CONTROLLER=10.1.0.1:4242\n"
                                   "  env: KOLO_JOB_ID=kolorun-test\n"
                                   "  env: KOLO_HOSTNAME=ns2\n"
                                   "  env: KOLO_START_TIMEOUT_SECONDS=20\n"
                                   "  env: HOROVOD_HOSTNAME=ns2\n"
                                   "  env: HOROVOD_RANK=2\n"
                                   "  env: HOROVOD_SIZE=3\n"
                                   "  env: HOROVOD_LOCAL_RANK=0\n"
                                   "  env: HOROVOD_LOCAL_SIZE=1\n"
                                   "  env: HOROVOD_CROSS_RANK=1\n"
                                   "  env: HOROVOD_CROSS_SIZE=2\n"
                                   "  env: RANK=2\n"
                                   "  env: WORLD_SIZE=3\n"
                                   "  env: LOCAL_RANK=0\n"
                                   "  env: LOCAL_WORLD_SIZE=1\n"
                                   "  env: MASTER_ADDR=10.1.0.1\n"
                                   "  env: KOLO_SECRET=(a fresh 64-hex-digit job secret)\n"));
  CHECK(text.find(job.secret) == std::string::npos);
}

}  // namespace
}  // namespace kolo::launcher
