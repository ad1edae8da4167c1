// ElasticDriver: kolorun's loop for an elastic job (docs/ELASTIC.md). It serves the elastic
// rendezvous (the job's membership lives here, not in any rank), runs the discovery script every
// second, starts a worker on each slot ElasticMembership asks to fill, stops the workers it says
// must go, forwards the workers' output line by line with a "[HOST:SLOT] " prefix and signals
// to every worker, and reports each new generation. The job ends when a worker finished it
// (exited 0) and every worker has exited, or fails when ElasticMembership says it cannot go on
// (then every worker is stopped: SIGTERM, SIGKILL after the grace period); below --min-np it
// says what it waits for, until when. The discovery script runs beside the loop, never
// blocking it: a hung script keeps the hosts it found before.
// Threading: runs on kolorun's main thread; the rendezvous server answers on gRPC's threads
// through ElasticMembership, which is thread-safe. Not reentrant (one SignalPipe per process).
#pragma once

#include <chrono>

#include "launcher/job_environment.h"
#include "launcher/job_plan.h"
#include "launcher/launch_options.h"
#include "launcher/supervisor.h"

namespace kolo::launcher {

struct ElasticDriverConfig {
  SupervisorConfig output;  // kill grace, drain grace, sinks, --output-dir (worker.HOST:SLOT.*)
  std::chrono::milliseconds discovery_interval{1000};
  std::chrono::milliseconds discovery_timeout{10000};
  // Below --min-np, how often kolorun says what it waits for (and when the wait starts);
  // every third of --elastic-timeout when that is shorter, at least every second.
  std::chrono::milliseconds shortfall_report_interval{30000};
};

// Runs the elastic job `options` describes until it ends; returns kolorun's exit code: 0 when
// a worker finished and every rank of the last generation exited 0, else the first of their
// failures' codes; 1 when the job failed for want of workers or hosts (the message says why);
// 128 + signal when kolorun was interrupted. Never 0 for a job no worker finished.
int RunElasticJob(const LaunchOptions& options, const JobLayout& job, const PlanContext& context,
                  const ElasticDriverConfig& config);

}  // namespace kolo::launcher
