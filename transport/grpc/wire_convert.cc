#include "transport/grpc/wire_convert.h"

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

StatusOr<Request> FromWire(const wire::Request& in) {
  Request request;
  switch (in.kind_case()) {
    case wire::Request::kFull:
      request.meta = FromWire(in.full());
      return request;
    case wire::Request::kCacheId:
      if (in.cache_id() == 0) return InvalidArgument("a request names cache id 0");
      request.cache_id = in.cache_id();
      return request;
    default:
      return InvalidArgument("a request has neither metadata nor a cache id");
  }
}

void ToWire(const Response& response, wire::Response* out) {
  SignatureToWire(response, out);
  out->set_seq(response.seq);
  for (const std::string& name : response.names) out->add_names(name);
  for (uint32_t id : response.cache_ids) out->add_cache_ids(id);
  for (int64_t n : response.num_elements) out->add_num_elements(n);
  out->set_error(response.error);
  out->set_error_code(static_cast<int32_t>(response.error_code));
  for (int64_t d : response.first_dims) out->add_first_dims(d);
  for (int64_t s : response.splits) out->add_splits(s);
  out->set_gpu(response.gpu);
  if (response.hierarchy_min_bytes.has_value()) {
    out->set_hierarchy_min_bytes(*response.hierarchy_min_bytes);
  }
}

Response FromWire(const wire::Response& in) {
  Response response;
  response.signature() = SignatureFromWire(in);
  response.seq = in.seq();
  response.gpu = in.gpu();
  if (in.has_hierarchy_min_bytes()) response.hierarchy_min_bytes = in.hierarchy_min_bytes();
  response.names.assign(in.names().begin(), in.names().end());
  response.cache_ids.assign(in.cache_ids().begin(), in.cache_ids().end());
  response.num_elements.assign(in.num_elements().begin(), in.num_elements().end());
  response.error = in.error();
  response.error_code = static_cast<StatusCode>(in.error_code());
  response.first_dims.assign(in.first_dims().begin(), in.first_dims().end());
  response.splits.assign(in.splits().begin(), in.splits().end());
  return response;
}

}  // namespace

wire::WorkerMessage ToWire(const WorkerMessage& message) {
  wire::WorkerMessage out;
  switch (message.kind) {
    case WorkerMessage::Kind::kHello:
      ToWire(message.hello, out.mutable_hello());
      break;
    case WorkerMessage::Kind::kRequests:
      for (const Request& request : message.requests) {
        wire::Request* r = out.mutable_requests()->add_requests();
        if (request.cache_id != 0) {
          r->set_cache_id(request.cache_id);
        } else {
          ToWire(request.meta, r->mutable_full());
        }
      }
      out.mutable_requests();  // an empty batch is still a batch
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
  switch (in.kind_case()) {
    case wire::WorkerMessage::kHello:
      message.kind = WorkerMessage::Kind::kHello;
      message.hello = FromWire(in.hello());
      return message;
    case wire::WorkerMessage::kRequests:
      message.kind = WorkerMessage::Kind::kRequests;
      message.requests.reserve(static_cast<size_t>(in.requests().requests_size()));
      for (const wire::Request& r : in.requests().requests()) {
        KOLO_ASSIGN_OR_RETURN(Request request, FromWire(r));
        message.requests.push_back(std::move(request));
      }
      return message;
    case wire::WorkerMessage::kShutdown:
      message.kind = WorkerMessage::Kind::kShutdown;
      return message;
    case wire::WorkerMessage::kAbort:
      message.kind = WorkerMessage::Kind::kAbort;
      message.reason = in.abort().reason();
      return message;
    case wire::WorkerMessage::kPing:
      message.kind = WorkerMessage::Kind::kPing;
      message.ping_unix_us = in.ping().client_unix_us();
      return message;
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
    case wire::ControllerMessage::kResponses:
      message.kind = ControllerMessage::Kind::kResponses;
      for (const wire::Response& r : in.responses().responses()) {
        message.responses.push_back(FromWire(r));
      }
      return message;
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
