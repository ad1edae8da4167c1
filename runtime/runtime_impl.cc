#include "runtime/runtime_impl.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <thread>

#include "controller/controller.h"
#include "core/check.h"
#include "core/clock.h"
#include "core/config/config_table.h"
#include "core/op_validation.h"
#include "core/spin_wait.h"
#include "ops/cpu_executor.h"
#include "runtime/fd_limit.h"
#include "runtime/job_credentials.h"
#include "runtime/local_address.h"
#include "transport/grpc/grpc_control_channel.h"
#include "transport/grpc/grpc_control_server.h"
#include "transport/shm/shm_mesh.h"
#include "transport/shm/shm_round_lane.h"
#include "transport/tcp/tcp_mesh.h"
#include "transport/tcp/tcp_round_lane.h"

namespace kolo {
namespace {

using SteadyTime = std::chrono::steady_clock;

SteadyTime::time_point DeadlineIn(double seconds) {
  return SteadyTime::now() +
         std::chrono::duration_cast<SteadyTime::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace

Topology ComputeTopology(const std::vector<PeerInfo>& peers, int rank) {
  Topology topology;
  std::map<std::string, int> host_index;  // host -> index by lowest rank
  std::vector<std::string> hosts_in_order;
  for (const PeerInfo& peer : peers) {
    if (host_index.emplace(peer.host, static_cast<int>(hosts_in_order.size())).second) {
      hosts_in_order.push_back(peer.host);
    }
  }
  const std::string& mine = peers[rank].host;
  topology.local_rank = 0;
  topology.local_size = 0;
  for (const PeerInfo& peer : peers) {
    if (peer.host != mine) continue;
    if (peer.rank < rank) ++topology.local_rank;
    ++topology.local_size;
  }
  topology.cross_rank = host_index[mine];
  topology.cross_size = static_cast<int>(hosts_in_order.size());
  return topology;
}

RuntimeImpl::RuntimeImpl(const Options& options, spdlog::level::level_enum level)
    : options_(options),
      logger_(MakeLogger(options.rank, "runtime", level)),
      timeline_(options.rank, options.size, SteadyClock::Get()),
      tracer_(&timeline_, options.rank),
      sets_(options.rank, options.size) {
  timeline_.set_max_bytes(options.timeline_max_mb << 20);
}

RuntimeImpl::~RuntimeImpl() {
  // Programmer error: the background thread cannot join itself.
  KOLO_CHECK(!BackgroundLoop::IsBackgroundThread() || shut_down_)
      << "a Runtime was destroyed from one of its callbacks";
  Shutdown().IgnoreError(); /* destructor: nobody to tell */
}

StatusOr<std::unique_ptr<RuntimeImpl>> RuntimeImpl::Create(const Options& options) {
  KOLO_RETURN_IF_ERROR(options.Validate());
  StatusOr<spdlog::level::level_enum> level = ParseLogLevel(options.log_level);
  if (!level.ok()) return level.status().WithContext("KOLO_LOG_LEVEL");
  std::unique_ptr<RuntimeImpl> impl(new RuntimeImpl(options, *level));
  Status started = impl->Start();
  if (!started.ok()) {
    impl->TellLateRanks();
    impl->Teardown();
    std::string where =
        options.controller_source.empty()
            ? ""
            : ", controller " + options.controller_address + " (" + options.controller_source + ")";
    return started.WithContext("init() of rank " + std::to_string(options.rank) + " of " +
                               std::to_string(options.size) + where);
  }
  return impl;
}

Status RuntimeImpl::Start() {
  // "DYNAMIC" is Horovod's "off until start_timeline()" (HOROVOD_TIMELINE=DYNAMIC), not a file.
  if (!options_.timeline_path.empty() && options_.timeline_path != "DYNAMIC") {
    KOLO_RETURN_IF_ERROR(timeline_.Start(options_.timeline_path).WithContext("KOLO_TIMELINE"));
  }
  for (const std::string& warning : options_.environment_warnings) logger_->warn("{}", warning);
  KOLO_ASSIGN_OR_RETURN(security_.credentials, LoadJobCredentials(options_));
  security_.tls_cert = options_.tls_cert;
  security_.tls_key = options_.tls_key;
  security_.tls_ca = options_.tls_ca;
  std::string controller_address = options_.controller_address;
  if (!controller_address.empty()) {
    std::string host;
    int port = 0;
    KOLO_RETURN_IF_ERROR(SplitHostPort(controller_address, "KOLO_CONTROLLER", &host, &port));
    KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
        options_, security_.credentials, !IsLoopbackHost(host),
        "the controller address " + controller_address + " is not a loopback address"));
  }
  if (security_.credentials.key.empty() && options_.size > 1) {  // one rank has no peers to admit
    logger_->warn(
        "no job secret (KOLO_SECRET): this single-host job's ports are not authenticated; any "
        "local process could join it. kolorun makes a secret");
  }
  const FdLimitChange fds = RaiseFdLimitToHard();
  if (!fds.error.empty()) {
    logger_->debug("file descriptor limit stays at {}: {}", fds.before, fds.error);
  } else if (fds.after != fds.before) {
    logger_->debug("raised the file descriptor limit from {} to the hard limit {}", fds.before,
                   fds.after);
  }
  if (options_.rank == 0) KOLO_RETURN_IF_ERROR(StartController(&controller_address));
  KOLO_RETURN_IF_ERROR(JoinJob(controller_address));
  executor_ =
      std::make_unique<ops::CpuExecutor>(*mesh_, MakeLogger(options_.rank, "ops", logger_->level()),
                                         ops::RingScratch::kDefaultBytes, shm_.get());
  GpuPlane::Config gpu_config;
  gpu_config.rank = options_.rank;
  gpu_config.size = options_.size;
  gpu_config.local_rank = topology_.local_rank;
  gpu_config.operations = options_.gpu_operations;
  gpu_config.timeout_seconds = options_.timeout_seconds;
  gpu_config.fusion_threshold_bytes = options_.fusion_threshold_bytes;
  std::string data_host;
  int data_port = 0;
  if (SplitHostPort(mesh_->listen_address(), "the data address", &data_host, &data_port).ok()) {
    StatusOr<std::string> interface = InterfaceOfAddress(data_host);
    if (interface.ok()) gpu_config.network_interface = *interface;  // else NCCL picks its own
  }
  KOLO_ASSIGN_OR_RETURN(gpu_, GpuPlane::Create(gpu_config, options_, executor_.get(), mesh_.get(),
                                               MakeLogger(options_.rank, "gpu", logger_->level())));
  BackgroundLoop::Config loop_config;
  loop_config.rank = options_.rank;
  loop_config.timeout_seconds = options_.timeout_seconds;
  loop_config.on_clock_offset = [this](double offset_us, double rtt_us) {
    timeline_.SetClockOffset(offset_us, rtt_us);
  };
  loop_config.size = options_.size;
  loop_config.busy_poll = mesh_->busy_poll();
  wait_spin_ = mesh_->busy_poll() ? std::chrono::microseconds(options_.wait_spin_us)
                                  : std::chrono::microseconds::zero();
  if (options_.rank == 0) loop_config.negotiation_sink = &timeline_;
  loop_config.fusion_threshold_bytes = options_.fusion_threshold_bytes;
  // A cached allreduce that waits longer than this for the other ranks goes to the controller,
  // whose stall inspector then watches it: well within the stall check time.
  loop_config.divert_after_seconds =
      options_.stall_check_seconds > 0 ? std::min(1.0, options_.stall_check_seconds / 2) : 1.0;
  loop_config.process_sets = &sets_;
  loop_config.set_executor = [this](int id) { return SetExecutor(id); };
  loop_config.set_removed = [this](int id) { set_planes_.erase(id); };
  if (options_.fast_path) {
    Logger lane_logger = MakeLogger(options_.rank, "fast-path", logger_->level());
    if (shm_) {  // round messages through the segment, the connections as doorbells
      round_lane_ = std::make_unique<transport::ShmRoundLane>(
          options_.rank, mesh_->TakeRoundConnections(), shm_->round_area(), lane_logger);
    } else {
      round_lane_ = std::make_unique<transport::TcpRoundLane>(
          options_.rank, mesh_->TakeRoundConnections(), lane_logger);
    }
  }
  loop_ = std::make_unique<BackgroundLoop>(loop_config, &queue_, &wakeup_, channel_, gpu_.get(),
                                           mesh_.get(), &tracer_, logger_, round_lane_.get());
  loop_->Start();
  logger_->info(
      "rank {} of {} ready (local {}/{}, cross {}/{}), controller {}{}; identity from {}; "
      "allreduce over {}; GPU tensors over {}",
      options_.rank, options_.size, topology_.local_rank, topology_.local_size,
      topology_.cross_rank, topology_.cross_size, controller_address,
      options_.controller_source.empty() ? "" : " (" + options_.controller_source + ")",
      options_.identity_source.empty() ? "no launcher variables" : options_.identity_source,
      shm_ ? "shared memory" : "tcp", gpu_->path_name());
  return Status::Ok();
}

Status RuntimeImpl::StartController(std::string* controller_address) {
  // A one-rank job needs no fixed port: the controller takes any free loopback port.
  if (controller_address->empty()) *controller_address = "127.0.0.1:0";
  std::string host;
  int port = 0;
  KOLO_RETURN_IF_ERROR(SplitHostPort(*controller_address, "KOLO_CONTROLLER", &host, &port));
  controller::Controller::Config config;
  config.size = options_.size;
  config.fusion_threshold_bytes = options_.fusion_threshold_bytes;
  config.cycle_time_ms = options_.cycle_time_ms;
  config.cache_capacity = options_.cache_capacity;
  config.stall_check_seconds = options_.stall_check_seconds;
  config.stall_shutdown_seconds = options_.stall_shutdown_seconds;
  config.trace = &timeline_;
  config.mark_cycles = options_.timeline_mark_cycles;
  config.start_timeout_seconds = options_.start_timeout_seconds;
  config.timeout_seconds = options_.timeout_seconds;
  controller_ = std::make_unique<controller::Controller>(
      config, SteadyClock::Get(), MakeLogger(options_.rank, "controller", logger_->level()));
  StatusOr<std::unique_ptr<transport::GrpcControlServer>> server =
      transport::GrpcControlServer::Start(
          *controller_address, controller_.get(), options_.timeout_seconds,
          MakeLogger(options_.rank, "control-server", logger_->level()), security_);
  if (!server.ok()) return server.status().WithContext("starting the controller");
  server_ = std::move(server).value();
  controller_started_ = SteadyTime::now();
  local_channel_ = std::make_unique<LocalControlChannel>(options_.rank, controller_.get(),
                                                         server_.get(), server_->generation());
  controller_->Attach(local_channel_.get());
  controller_->Start();
  *controller_address = host + ":" + std::to_string(server_->port());
  return Status::Ok();
}

Status RuntimeImpl::JoinJob(const std::string& controller_address) {
  // At the start timeout the controller gives up and tells the ranks already connected which
  // ranks never arrived; every rank waits a little longer than that for the verdict.
  const double grace = std::min(2.0, options_.start_timeout_seconds);
  SteadyTime::time_point deadline = DeadlineIn(options_.start_timeout_seconds + grace);
  std::string controller_host;
  int controller_port = 0;
  KOLO_RETURN_IF_ERROR(
      SplitHostPort(controller_address, "KOLO_CONTROLLER", &controller_host, &controller_port));
  std::string data_host = options_.data_address;
  if (data_host.empty()) {
    KOLO_ASSIGN_OR_RETURN(data_host, LocalAddressRouting(controller_host));
  }
  transport::TcpMesh::Config mesh_config;
  mesh_config.rank = options_.rank;
  mesh_config.size = options_.size;
  mesh_config.bind_host = data_host;
  mesh_config.auth.credentials = security_.credentials;
  mesh_config.timeout_seconds = options_.timeout_seconds;
  mesh_config.logger = MakeLogger(options_.rank, "data-plane", logger_->level());
  mesh_config.round_lane = options_.fast_path;
  mesh_config.transport = options_.transport;
  StatusOr<std::unique_ptr<transport::TcpMesh>> mesh = transport::TcpMesh::Listen(mesh_config);
  if (!mesh.ok()) return mesh.status().WithContext("data-plane listener on " + data_host);
  mesh_ = std::move(mesh).value();

  if (local_channel_) {
    channel_ = local_channel_.get();
  } else {
    grpc_channel_ = transport::GrpcControlChannel::Create(
        controller_address, options_.timeout_seconds,
        MakeLogger(options_.rank, "control", logger_->level()), security_);
    channel_ = grpc_channel_.get();
  }
  // An abort must reach a background thread blocked in the ring at once, not at the ring's
  // deadline.
  channel_->SetFatalHandler([this](const Status& why) {
    mesh_->Interrupt(why);
    if (SharedMemoryPlane* shm = shm_plane_.load()) shm->Interrupt(why);
  });
  Hello hello;
  hello.rank = options_.rank;
  hello.size = options_.size;
  hello.host = options_.host.empty() ? LocalHostName() : options_.host;
  hello.data_address = mesh_->listen_address();
  StatusOr<std::vector<PeerInfo>> peers =
      channel_->Connect(hello, deadline, [this] { wakeup_.Notify(); });
  if (!peers.ok()) return StartFailure(peers.status());
  topology_ = ComputeTopology(*peers, options_.rank);
  KOLO_RETURN_IF_ERROR(CheckUnauthenticatedJob(
      options_, security_.credentials, topology_.cross_size > 1,
      "its ranks report " + std::to_string(topology_.cross_size) + " host names"));
  if (options_.local_rank >= 0) topology_.local_rank = options_.local_rank;
  if (options_.local_size >= 0) topology_.local_size = options_.local_size;
  // Before connecting: a rank that fails here leaves, and a peer still connecting would
  // report that as a lost rank instead of this reason (every rank sees the same peer table).
  if (options_.transport == Transport::kShm && topology_.local_size != options_.size) {
    return StartSharedMemory();
  }
  mesh_->SetGeneration(channel_->generation());
  std::vector<std::string> addresses;
  for (const PeerInfo& peer : *peers) addresses.push_back(peer.data_address);
  KOLO_RETURN_IF_ERROR(mesh_->Connect(addresses, deadline));
  mesh_->SetLocalRanks(topology_.local_size, options_.cpu_bind == "core");
  return StartSharedMemory();
}

Status RuntimeImpl::StartSharedMemory() {
  const bool one_host = topology_.local_size == options_.size;
  if (options_.transport == Transport::kShm && !one_host) {
    return FailedPrecondition(
        "KOLO_TRANSPORT=shm needs every rank on one host, but this host has " +
        std::to_string(topology_.local_size) + " of the " + std::to_string(options_.size) +
        " ranks; multi-host jobs use tcp (KOLO_TRANSPORT=auto or tcp)");
  }
  const bool use_shm = options_.transport == Transport::kShm ||
                       (options_.transport == Transport::kAuto && one_host && options_.size > 1);
  if (!use_shm) return Status::Ok();
  transport::ShmMesh::Config config;
  config.rank = options_.rank;
  config.size = options_.size;
  config.timeout_seconds = options_.timeout_seconds;
  config.spin = mesh_->busy_poll();  // decided by SetLocalRanks, KOLO_CPU_BIND included
  config.logger = MakeLogger(options_.rank, "shm", logger_->level());
  StatusOr<std::unique_ptr<transport::ShmMesh>> shm = transport::ShmMesh::Create(config, *mesh_);
  if (!shm.ok()) {
    return shm.status().WithContext(std::string("KOLO_TRANSPORT=") +
                                    TransportName(options_.transport));
  }
  shm_ = std::move(shm).value();
  shm_plane_.store(shm_.get());
  return Status::Ok();
}

Status RuntimeImpl::StartFailure(const Status& connect_error) {
  if (connect_error.code() != StatusCode::kDeadlineExceeded) return connect_error;
  return Status(connect_error.code(),
                connect_error.message() +
                    " (KOLO_START_TIMEOUT_SECONDS=" + SecondsText(options_.start_timeout_seconds) +
                    "; is rank 0 running, and is KOLO_CONTROLLER, or the launcher's rule, right?)");
}

Executor* RuntimeImpl::SetExecutor(int id) {
  auto it = set_planes_.find(id);
  if (it != set_planes_.end()) return it->second.executor.get();
  std::vector<int> ranks = sets_.Members(id);
  if (ranks.empty()) return nullptr;
  SetPlane set;
  set.plane = std::make_unique<SubsetDataPlane>(*mesh_, std::move(ranks));
  // Shared memory spans every rank of the host; a set's ring runs over TCP (DESIGN-NOTES).
  set.executor = std::make_unique<ops::CpuExecutor>(
      *set.plane, MakeLogger(options_.rank, "ops", logger_->level()),
      ops::RingScratch::kDefaultBytes, nullptr);
  Executor* executor = set.executor.get();
  set_planes_.emplace(id, std::move(set));
  return executor;
}

StatusOr<SetMembership> RuntimeImpl::CurrentMembership(const std::string& what) const {
  return sets_.Resolve(CurrentProcessSet(), what);
}

StatusOr<int> RuntimeImpl::RootInSet(const SetMembership& set, int root,
                                     const std::string& what) const {
  if (set.id == 0) return root;
  const std::vector<int> ranks = sets_.Members(set.id);
  auto it = std::find(ranks.begin(), ranks.end(), root);
  if (it == ranks.end()) {
    std::string members;
    for (size_t i = 0; i < ranks.size(); ++i) {
      members += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    return InvalidArgument(what + ": root rank " + std::to_string(root) +
                           " is not in process set " + std::to_string(set.id) + " (ranks [" +
                           members + "])");
  }
  return static_cast<int>(it - ranks.begin());
}

Status RuntimeImpl::ScopeToSet(TensorMeta* meta, int id) const {
  const std::string what = OpTypeName(meta->op) + " '" + meta->name + "'";
  if (!meta->device.is_cpu()) {
    return InvalidArgument(what + " in process set " + std::to_string(id) +
                           ": process sets run CPU tensors only (GPU tensors: the global set)");
  }
  if (meta->name.find(" [process set ") != std::string::npos) {
    return InvalidArgument(what + ": ' [process set ' is reserved in names");
  }
  meta->name = ScopedName(id, meta->name);
  if (!meta->group.empty()) meta->group = ScopedName(id, meta->group);
  meta->process_set = id;
  return Status::Ok();
}

Status RuntimeImpl::Enqueue(TensorMeta meta, const TensorView& input, const TensorView& output,
                            Callback callback, Allocator allocate,
                            std::vector<int64_t>* received_splits, int* int_result) {
  const int set = CurrentProcessSet();
  if (set == 0 || meta.op == OpType::kAddProcessSet || meta.op == OpType::kRemoveProcessSet) {
    return EnqueueScoped(std::move(meta), input, output, std::move(callback), std::move(allocate),
                         received_splits, int_result);
  }
  const std::string what = OpTypeName(meta.op) + " '" + meta.name + "'";
  KOLO_RETURN_IF_ERROR(ScopeToSet(&meta, set));
  // Under the registry's lock: a removal of the set cannot overtake this op.
  return sets_.Enqueue(set, what, [&] {
    return EnqueueScoped(std::move(meta), input, output, std::move(callback), std::move(allocate),
                         received_splits, int_result);
  });
}

Status RuntimeImpl::EnqueueScoped(TensorMeta meta, const TensorView& input,
                                  const TensorView& output, Callback callback, Allocator allocate,
                                  std::vector<int64_t>* received_splits, int* int_result) {
  if (!meta.device.is_cpu()) KOLO_RETURN_IF_ERROR(gpu_->CheckOp(meta, input, output));
  auto entry = std::make_unique<TensorEntry>();
  entry->meta = std::move(meta);
  entry->input = input;
  entry->output = output;
  entry->callback = std::move(callback);
  entry->allocate = std::move(allocate);
  entry->received_splits = received_splits;
  entry->int_result = int_result;
  entry->enqueued_at = SteadyTime::now();
  // The span opens before the entry is queued, so its begin precedes everything the
  // background thread records for it.
  tracer_.Begin(*entry);
  Status queued = queue_.Enqueue(std::move(entry));  // leaves `entry` with us on failure
  if (!queued.ok()) tracer_.Abandon(*entry, queued);
  return queued;
}

Status RuntimeImpl::EnqueueGroup(std::vector<TensorMeta> metas,
                                 const std::vector<TensorView>& inputs,
                                 const std::vector<TensorView>& outputs, Callback callback,
                                 std::vector<Allocator> allocators) {
  const int set = CurrentProcessSet();
  if (set == 0 || metas.empty()) {
    return EnqueueGroupScoped(std::move(metas), inputs, outputs, std::move(callback),
                              std::move(allocators));
  }
  const std::string what = "grouped " + OpTypeName(metas[0].op) + " '" + metas[0].name + "'";
  for (TensorMeta& meta : metas) KOLO_RETURN_IF_ERROR(ScopeToSet(&meta, set));
  return sets_.Enqueue(set, what, [&] {
    return EnqueueGroupScoped(std::move(metas), inputs, outputs, std::move(callback),
                              std::move(allocators));
  });
}

Status RuntimeImpl::EnqueueGroupScoped(std::vector<TensorMeta> metas,
                                       const std::vector<TensorView>& inputs,
                                       const std::vector<TensorView>& outputs, Callback callback,
                                       std::vector<Allocator> allocators) {
  // One user callback for the group: it runs once the last member completed, with the first
  // failure if any member failed.
  struct Group {
    Group(size_t members, Callback done) : left(members), callback(std::move(done)) {}
    Mutex mu;
    size_t left KOLO_GUARDED_BY(mu);
    Status first_error KOLO_GUARDED_BY(mu);
    const Callback callback;
  };
  for (size_t i = 0; i < metas.size(); ++i) {
    if (!metas[i].device.is_cpu()) {
      KOLO_RETURN_IF_ERROR(gpu_->CheckOp(metas[i], inputs[i], outputs[i]));
    }
  }
  auto group = std::make_shared<Group>(metas.size(), std::move(callback));
  std::vector<std::unique_ptr<TensorEntry>> entries;
  const SteadyTime::time_point now = SteadyTime::now();
  for (size_t i = 0; i < metas.size(); ++i) {
    auto entry = std::make_unique<TensorEntry>();
    entry->meta = std::move(metas[i]);
    entry->input = inputs[i];
    entry->output = outputs[i];
    if (!allocators.empty()) entry->allocate = std::move(allocators[i]);
    entry->enqueued_at = now;
    entry->callback = [group](const Status& s) {
      Status result;
      {
        MutexLock lock(&group->mu);
        if (!s.ok() && group->first_error.ok()) group->first_error = s;
        if (--group->left != 0) return;
        result = group->first_error;
      }
      if (group->callback) group->callback(result);
    };
    tracer_.Begin(*entry);
    entries.push_back(std::move(entry));
  }
  Status queued = queue_.EnqueueGroup(entries);  // leaves `entries` with us on failure
  if (!queued.ok()) {
    for (auto& entry : entries) tracer_.Abandon(*entry, queued);
  }
  return queued;
}

Status RuntimeImpl::AddProcessSetAsync(const std::vector<int>& ranks, int* id, Callback callback,
                                       const std::string& static_sets) {
  KOLO_ASSIGN_OR_RETURN(std::vector<int> sorted, CheckSetRanks(ranks, options_.size));
  TensorMeta meta = BarrierMeta(kAddProcessSetName, OpType::kAddProcessSet);
  meta.splits.assign(sorted.begin(), sorted.end());
  meta.group = static_sets;  // compared by the controller; never a grouped op's key here
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  return EnqueueScoped(std::move(meta), none, none, std::move(callback), nullptr, nullptr, id);
}

Status RuntimeImpl::RemoveProcessSetAsync(int id, Callback callback) {
  KOLO_RETURN_IF_ERROR(sets_.BeginRemove(id));
  TensorMeta meta = BarrierMeta(kRemoveProcessSetName, OpType::kRemoveProcessSet);
  meta.root = id;
  TensorView none;
  none.dtype = DataType::kUInt8;
  none.shape = {0};
  Status queued =
      EnqueueScoped(std::move(meta), none, none, std::move(callback), nullptr, nullptr, nullptr);
  if (!queued.ok()) sets_.EndRemove(id);
  return queued;
}

bool RuntimeImpl::DriveOrSpin(const std::function<bool()>& done) {
  // Never waits for shutdown() (or a timeline start or stop) on another thread: the loop may
  // be going away then, and this call only watches its op.
  if (wait_spin_ > std::chrono::microseconds::zero() && lifecycle_mu_.TryLock()) {
    const bool drove = !shut_down_ && loop_ != nullptr && loop_->Drive(done, wait_spin_);
    lifecycle_mu_.Unlock();
    if (drove) return done();
  }
  wakeup_.Notify();  // the enqueue left the wake-up to this call (TensorQueue::QuietScope)
  return SpinWait(done, wait_spin_);
}

Status RuntimeImpl::RawAllreduce(void* data, int64_t count, DataType dtype) {
  Response response;
  response.op = OpType::kAllreduce;
  response.dtype = dtype;
  response.names = {"kolo.raw"};
  response.cache_ids = {0};
  response.num_elements = {count};
  TensorEntry entry;
  entry.meta.name = "kolo.raw";
  entry.input = entry.output = TensorView{data, dtype, {count}, Device::Cpu()};
  Status result;
  // On this thread: the data plane alone, without the hand-off to the background thread.
  KOLO_RETURN_IF_ERROR(
      loop_->RunWithDataPlane([&] { result = executor_->Execute(response, {&entry}, nullptr); }));
  return result;
}

Status RuntimeImpl::StartTimeline(const std::string& path, bool mark_cycles) {
  if (path.empty()) return InvalidArgument("start_timeline() needs a file path");
  MutexLock lock(&lifecycle_mu_);  // controller_ stays while we use it
  KOLO_RETURN_IF_ERROR(timeline_.Start(path));
  if (controller_) controller_->SetMarkCycles(mark_cycles);
  return Status::Ok();
}

Status RuntimeImpl::StopTimeline() {
  MutexLock lock(&lifecycle_mu_);
  if (!loop_) return timeline_.Stop();
  // Detached on the background thread, between responses: an op whose blocking call just
  // returned has run its callback, but the end of its span may not be recorded yet. The file
  // is then flushed and closed here, never on the background thread.
  std::shared_ptr<TimelineWriter> writer;
  Status ran = loop_->RunOnLoop([&] { writer = timeline_.Detach(); });
  if (!ran.ok()) return ran.WithContext("stop_timeline()");
  if (writer == nullptr) return Status::Ok();
  writer->Close();
  return writer->status().WithContext("stop_timeline");
}

Status RuntimeImpl::Shutdown() {
  if (BackgroundLoop::IsBackgroundThread()) {
    return FailedPrecondition(
        "shutdown() was called from a kolo callback; call it from your own thread");
  }
  MutexLock lock(&lifecycle_mu_);
  if (shut_down_) return Status::Ok();
  shut_down_ = true;
  Status status = loop_ ? loop_->Stop() : Status::Ok();
  Teardown();
  return status;
}

void RuntimeImpl::TellLateRanks() {
  if (!controller_ || !server_ || options_.start_timeout_seconds <= 0) return;
  std::vector<int> untold = controller_->RanksNotTold();
  if (untold.empty()) return;
  const SteadyTime::time_point deadline =
      controller_started_ + std::chrono::duration_cast<SteadyTime::duration>(
                                std::chrono::duration<double>(options_.start_timeout_seconds));
  std::string ranks;
  for (size_t i = 0; i < untold.size(); ++i)
    ranks += (i == 0 ? "" : ", ") + std::to_string(untold[i]);
  logger_->info(
      "the start was aborted; rank{} {} {} not connected yet: the controller stays up to tell "
      "{} why, at most until the start timeout (KOLO_START_TIMEOUT_SECONDS={})",
      untold.size() == 1 ? "" : "s", ranks, untold.size() == 1 ? "has" : "have",
      untold.size() == 1 ? "it" : "them", SecondsText(options_.start_timeout_seconds));
  while (!untold.empty() && SteadyTime::now() < deadline) {
    // Polls a rare error path at a coarse step; the deadline bounds it.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    untold = controller_->RanksNotTold();
  }
}

void RuntimeImpl::Teardown() {
  // After a job-wide Shutdown every worker closes its stream as soon as it has read it, and
  // rank 0's server waits for that (bounded by the deadline) before cancelling what is left.
  // Otherwise (an abort, or leaving without the others) it only flushes what is queued.
  const bool job_done = controller_ && controller_->shutdown_sent();
  SteadyTime::time_point deadline = DeadlineIn(job_done ? std::min(options_.timeout_seconds, 10.0)
                                                        : std::min(options_.timeout_seconds, 1.0));
  queue_.Close(ShutdownError("kolo is shut down; no new ops are accepted"));
  if (loop_) loop_->Stop().IgnoreError();  // Shutdown() already returned its status
  if (channel_) channel_->Close(deadline);
  if (server_) server_->Stop(deadline);
  if (controller_) controller_->Stop();
  loop_.reset();
  round_lane_.reset();
  // After the loop and the controller stopped recording: flush and close the file.
  Status closed = timeline_.Stop();
  if (!closed.ok()) logger_->warn("timeline: {}", closed.message());
  if (gpu_) gpu_->Stop();  // waits for its device work; uses executor_ and mesh_
  executor_.reset();
  channel_ = nullptr;
  grpc_channel_.reset();
  shm_plane_.store(nullptr);
  shm_.reset();
  mesh_.reset();
  server_.reset();
  controller_.reset();
  local_channel_.reset();  // the controller's outbox
}

}  // namespace kolo
