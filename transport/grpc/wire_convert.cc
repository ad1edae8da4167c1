#include "transport/grpc/wire_convert.h"

#include "transport/grpc/id_runs.h"

namespace kolo::transport {
namespace {

// An op's signature (core/op_signature.h) on the wire: the same fields in a request's
// metadata and in a response.
template <typename Wire>
void SignatureToWire(const OpSignature& signature, Wire* out) {
  out->set_op(static_cast<int32_t>(signature.op));
  out->set_dtype(static_cast<int32_t>(signature.dtype));
  out->set_reduce_op(static_cast<int32_t>(signature.reduce_op));
  out->set_prescale(signature.prescale);
  out->set_postscale(signature.postscale);
  out->set_root(signature.root);
  out->set_process_set(signature.process_set);
}

template <typename Wire>
OpSignature SignatureFromWire(const Wire& in) {
  OpSignature signature;
  signature.op = static_cast<OpType>(in.op());
  signature.dtype = static_cast<DataType>(in.dtype());
  signature.reduce_op = static_cast<ReduceOp>(in.reduce_op());
  signature.prescale = in.prescale();
  signature.postscale = in.postscale();
  signature.root = in.root();
  signature.process_set = in.process_set();
  return signature;
}

void ToWire(const TensorMeta& meta, wire::TensorRequest* out) {
  SignatureToWire(meta, out);
  out->set_name(meta.name);
  for (int64_t dim : meta.shape) out->add_shape(dim);
  out->set_device(meta.device.index);
  for (int64_t s : meta.splits) out->add_splits(s);
  out->set_group(meta.group);
  out->set_group_size(meta.group_size);
}

TensorMeta FromWire(const wire::TensorRequest& in) {
  TensorMeta meta;
  meta.signature() = SignatureFromWire(in);
  meta.name = in.name();
  meta.shape.assign(in.shape().begin(), in.shape().end());
  meta.device.index = in.device();
  meta.splits.assign(in.splits().begin(), in.splits().end());
  meta.group = in.group();
  meta.group_size = in.group_size();
  return meta;
}

void ToWire(const Hello& hello, wire::Hello* out) {
  out->set_rank(hello.rank);
  out->set_size(hello.size);
  out->set_host(hello.host);
  out->set_data_address(hello.data_address);
  out->set_protocol(hello.protocol);
  out->set_kolo_version(hello.kolo_version);
  out->set_machine(hello.machine);
}

Hello FromWire(const wire::Hello& in) {
  Hello hello;
  hello.rank = in.rank();
  hello.size = in.size();
  hello.host = in.host();
  hello.data_address = in.data_address();
  hello.protocol = in.protocol();
  hello.kolo_version = in.kolo_version();
  hello.machine = in.machine();
  return hello;
}

// Fills a request batch into a vector that may hold the previous batch's requests: their
// slots are reused rather than destroyed and built again, which at a thousand ranks' batches
// of 161 cached ids a step was 4% of the controller's CPU (docs/SCALE.md). A slot that held a
// cache id has default metadata (this is the only writer of such slots), so reusing it for an
// id only sets the id.
class RequestSlots {
 public:
  explicit RequestSlots(std::vector<Request>* out) : out_(out) {}
  // Drops the slots not reused.
  void Done() { out_->resize(used_); }
  Request& Full() {
    Request& r = Next();
    r.cache_id = 0;
    return r;
  }
  void Id(uint32_t id) {
    Request& r = Next();
    if (r.cache_id == 0) r.meta = TensorMeta{};  // a fresh slot or one that held metadata
    r.cache_id = id;
  }

 private:
  Request& Next() {
    return used_ < out_->size() ? (*out_)[used_++] : (++used_, out_->emplace_back());
  }
  std::vector<Request>* const out_;
  size_t used_ = 0;
};

// Appends what `in` stands for to *out: one request, or one per id of a run. `id_budget`: the
// ids the message's runs may still name (AppendIdRun).
Status AppendRequests(const wire::Request& in, size_t* id_budget, RequestSlots* out) {
  switch (in.kind_case()) {
    case wire::Request::kFull:
      out->Full().meta = FromWire(in.full());
      return Status::Ok();
    case wire::Request::kCacheId:
      if (in.cache_id() == 0) return InvalidArgument("a request names cache id 0");
      out->Id(in.cache_id());
      return Status::Ok();
    case wire::Request::kCached: {
      thread_local std::vector<uint32_t> ids;  // a reused scratch list
      ids.clear();
      KOLO_RETURN_IF_ERROR(AppendIdRun(in.cached(), id_budget, &ids));
      for (uint32_t id : ids) out->Id(id);
      return Status::Ok();
    }
    default:
      return InvalidArgument("a request has neither metadata nor a cache id");
  }
}

// Appends `requests` to *out, each run of ascending cache-id requests as one IdRun.
void ToWire(const std::vector<Request>& requests, wire::RequestBatch* out) {
  std::vector<uint32_t> ids;
  for (size_t i = 0; i < requests.size();) {
    if (requests[i].cache_id == 0) {
      ToWire(requests[i].meta, out->add_requests()->mutable_full());
      ++i;
      continue;
    }
    ids.clear();
    while (i < requests.size() && requests[i].cache_id != 0) ids.push_back(requests[i++].cache_id);
    for (size_t at = 0; at < ids.size();) {
      const size_t n = IdRunLength(ids.data() + at, ids.size() - at);
      if (n == 1) {
        out->add_requests()->set_cache_id(ids[at]);
      } else {
        EncodeIdRun(ids.data() + at, n, out->add_requests()->mutable_cached());
      }
      at += n;
    }
  }
}

void ToWireHead(const Response& response, wire::Response* out) {
  SignatureToWire(response, out);
  out->set_seq(response.seq);
  out->set_error(response.error);
  out->set_error_code(static_cast<int32_t>(response.error_code));
  for (int64_t d : response.first_dims) out->add_first_dims(d);
  for (int64_t s : response.splits) out->add_splits(s);
  out->set_gpu(response.gpu);
  if (response.hierarchy_min_bytes.has_value()) {
    out->set_hierarchy_min_bytes(*response.hierarchy_min_bytes);
  }
}

// `id_budget`: as AppendRequests'.
StatusOr<Response> FromWire(const wire::Response& in, size_t* id_budget) {
  Response response;
  response.signature() = SignatureFromWire(in);
  response.seq = in.seq();
  response.gpu = in.gpu();
  if (in.has_hierarchy_min_bytes()) response.hierarchy_min_bytes = in.hierarchy_min_bytes();
  response.error = in.error();
  response.error_code = static_cast<StatusCode>(in.error_code());
  response.first_dims.assign(in.first_dims().begin(), in.first_dims().end());
  response.splits.assign(in.splits().begin(), in.splits().end());
  if (in.by_id()) {
    if (in.names_size() != 0 || in.cache_ids_size() != 0 || in.num_elements_size() != 0) {
      return InvalidArgument("a response by cache id also carries names or ids");
    }
    for (const wire::IdRun& run : in.id_runs()) {
      KOLO_RETURN_IF_ERROR(AppendIdRun(run, id_budget, &response.cache_ids));
    }
    return response;  // names and element counts: ResponseNames::Fill
  }
  response.names.assign(in.names().begin(), in.names().end());
  response.cache_ids.assign(in.cache_ids().begin(), in.cache_ids().end());
  response.num_elements.assign(in.num_elements().begin(), in.num_elements().end());
  return response;
}

}  // namespace

void ToWire(const Response& response, wire::Response* out) {
  ToWireHead(response, out);
  for (const std::string& name : response.names) out->add_names(name);
  for (uint32_t id : response.cache_ids) out->add_cache_ids(id);
  for (int64_t n : response.num_elements) out->add_num_elements(n);
}

void ToWireById(const Response& response, wire::Response* out) {
  ToWireHead(response, out);
  out->set_by_id(true);
  const std::vector<uint32_t>& ids = response.cache_ids;
  for (size_t at = 0; at < ids.size();) {
    const size_t n = IdRunLength(ids.data() + at, ids.size() - at);
    EncodeIdRun(ids.data() + at, n, out->add_id_runs());
    at += n;
  }
}

wire::WorkerMessage ToWire(const WorkerMessage& message) {
  wire::WorkerMessage out;
  switch (message.kind) {
    case WorkerMessage::Kind::kHello:
      ToWire(message.hello, out.mutable_hello());
      break;
    case WorkerMessage::Kind::kRequests:
      ToWire(message.requests, out.mutable_requests());  // an empty batch is still a batch
      break;
    case WorkerMessage::Kind::kShutdown:
      out.mutable_shutdown();
      break;
    case WorkerMessage::Kind::kAbort:
      out.mutable_abort()->set_reason(message.reason);
      break;
    case WorkerMessage::Kind::kPing:
      out.mutable_ping()->set_client_unix_us(message.ping_unix_us);
      break;
  }
  return out;
}

StatusOr<WorkerMessage> FromWire(const wire::WorkerMessage& in) {
  WorkerMessage message;
  KOLO_RETURN_IF_ERROR(FromWire(in, &message));
  return message;
}

Status FromWire(const wire::WorkerMessage& in, WorkerMessage* out) {
  if (in.kind_case() != wire::WorkerMessage::kRequests) out->requests.clear();
  out->reason.clear();
  out->ping_unix_us = 0;
  switch (in.kind_case()) {
    case wire::WorkerMessage::kHello:
      out->kind = WorkerMessage::Kind::kHello;
      out->hello = FromWire(in.hello());
      return Status::Ok();
    case wire::WorkerMessage::kRequests: {
      out->kind = WorkerMessage::Kind::kRequests;
      // Reuses the slots of the requests `out` held (the server's scratch message).
      RequestSlots slots(&out->requests);
      size_t id_budget = kMaxIdsInRuns;
      for (const wire::Request& r : in.requests().requests()) {
        const Status appended = AppendRequests(r, &id_budget, &slots);
        if (!appended.ok()) {
          slots.Done();
          return appended;
        }
      }
      slots.Done();
      return Status::Ok();
    }
    case wire::WorkerMessage::kShutdown:
      out->kind = WorkerMessage::Kind::kShutdown;
      return Status::Ok();
    case wire::WorkerMessage::kAbort:
      out->kind = WorkerMessage::Kind::kAbort;
      out->reason = in.abort().reason();
      return Status::Ok();
    case wire::WorkerMessage::kPing:
      out->kind = WorkerMessage::Kind::kPing;
      out->ping_unix_us = in.ping().client_unix_us();
      return Status::Ok();
    default:
      return InvalidArgument("a worker message has no kind");
  }
}

wire::ControllerMessage ToWire(const ControllerMessage& message) {
  wire::ControllerMessage out;
  switch (message.kind) {
    case ControllerMessage::Kind::kWelcome:
      out.mutable_welcome();  // present even with no peers
      for (const PeerInfo& peer : message.peers) {
        wire::Peer* p = out.mutable_welcome()->add_peers();
        p->set_rank(peer.rank);
        p->set_host(peer.host);
        p->set_data_address(peer.data_address);
        p->set_machine(peer.machine);
      }
      break;
    case ControllerMessage::Kind::kResponses:
      out.mutable_responses();
      for (const Response& response : message.responses) {
        ToWire(response, out.mutable_responses()->add_responses());
      }
      break;
    case ControllerMessage::Kind::kShutdown:
      out.mutable_shutdown();
      break;
    case ControllerMessage::Kind::kAbort:
      out.mutable_abort()->set_reason(message.reason);
      break;
    case ControllerMessage::Kind::kPong:
      out.mutable_pong()->set_client_unix_us(message.ping_unix_us);
      out.mutable_pong()->set_server_unix_us(message.controller_unix_us);
      break;
  }
  return out;
}

StatusOr<ControllerMessage> FromWire(const wire::ControllerMessage& in) {
  ControllerMessage message;
  switch (in.kind_case()) {
    case wire::ControllerMessage::kWelcome:
      message.kind = ControllerMessage::Kind::kWelcome;
      for (const wire::Peer& p : in.welcome().peers()) {
        message.peers.push_back({p.rank(), p.host(), p.data_address(), p.machine()});
      }
      return message;
    case wire::ControllerMessage::kResponses: {
      message.kind = ControllerMessage::Kind::kResponses;
      message.responses.reserve(static_cast<size_t>(in.responses().responses_size()));
      size_t id_budget = kMaxIdsInRuns;
      for (const wire::Response& r : in.responses().responses()) {
        KOLO_ASSIGN_OR_RETURN(Response response, FromWire(r, &id_budget));
        message.responses.push_back(std::move(response));
      }
      return message;
    }
    case wire::ControllerMessage::kShutdown:
      message.kind = ControllerMessage::Kind::kShutdown;
      return message;
    case wire::ControllerMessage::kAbort:
      message.kind = ControllerMessage::Kind::kAbort;
      message.reason = in.abort().reason();
      return message;
    case wire::ControllerMessage::kPong:
      message.kind = ControllerMessage::Kind::kPong;
      message.ping_unix_us = in.pong().client_unix_us();
      message.controller_unix_us = in.pong().server_unix_us();
      return message;
    default:
      return InvalidArgument("a controller message has no kind");
  }
}

}  // namespace kolo::transport
