// What the first bytes of a connection to the controller port say about the client: the
// HTTP/2 client preface every gRPC client sends first (RFC 9113 §3.4), a part of it, or
// something else, named for the refusal log (an HTTP/1 request, a TLS hello, garbage). Used by
// the FrontDoor. A pure function; thread-safe.
#pragma once

#include <string>
#include <string_view>

namespace kolo::transport {

// "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24 bytes.
inline constexpr std::string_view kHttp2Preface("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24);

struct FirstBytes {
  enum class Kind {
    kPreface,         // the whole preface: a gRPC (HTTP/2) client
    kPartialPreface,  // a proper prefix of it so far: wait for more
    kHttp1,           // an HTTP/1 request line
    kTls,             // a TLS handshake record
    kGarbage,         // anything else
  };
  Kind kind;
  // For the refusal kinds: a short constant for rate limiting ("http1") and the reason for
  // the log line; printable ASCII only, whatever the bytes were.
  std::string key;
  std::string reason;
};

// Classifies `bytes`, what has arrived so far (peeked, not consumed); not empty.
// `more_follow`: more bytes may have arrived than `bytes` holds (the peek filled its buffer).
FirstBytes ClassifyFirstBytes(std::string_view bytes, bool more_follow);

}  // namespace kolo::transport
