#ifndef RELSERVE_SERVER_HTTP_TRANSPORT_REQUEST_BODY_H_
#define RELSERVE_SERVER_HTTP_TRANSPORT_REQUEST_BODY_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "server/http_transport/http_request.h"

namespace relserve {

// How a request's body is delimited (RFC 9112 6), decided from its head alone, so that limits
// apply before any byte of the body is read.
struct BodyFraming {
  enum class Kind {
    kNone,     // no body: neither Content-Length nor Transfer-Encoding
    kLength,   // Content-Length: `length` bytes
    kChunked,  // Transfer-Encoding: chunked
    kError,    // answer `status` with `error` and close the connection
  };
  Kind kind = Kind::kNone;
  uint64_t length = 0;
  // On kError: 400 (a malformed or contradictory framing), 413 (a Content-Length over the
  // limit) or 501 (a transfer coding other than chunked).
  int status = 0;
  std::string error;
};

// Rules:
// - Transfer-Encoding and Content-Length together: 400 (a request that two parsers could
//   frame differently is refused, not guessed at; RFC 9112 6.1 allows this).
// - Transfer-Encoding: the codings of every such field, in order, must be exactly one
//   "chunked" (case-insensitive); another coding before it ("gzip, chunked") is 501, since no
//   coding but chunked is decoded; a list that does not end with chunked is 400 (6.1: the
//   length cannot be determined). Transfer-Encoding in an HTTP/1.0 request: 400.
// - Content-Length: one or more fields (or a comma-separated list) whose values are all the
//   same decimal number (6.3); anything else (-1, 1e3, "", two different values) is 400. A
//   length over max_body_bytes is 413 however many digits it has (2^64 included).
// - Neither, on a POST, PUT or PATCH: 411 (its body would silently be empty); other methods
//   have no body.
BodyFraming DecideBodyFraming(const HttpRequestHead& head, size_t max_body_bytes);

// Decodes a chunked body (RFC 9112 7.1) as its bytes arrive, counting the decoded size against
// the limit as it goes: a body over the limit is refused at the chunk size that would exceed
// it, before its data is read. Chunk extensions are skipped; trailer fields are read and
// dropped. Framing lines end with CRLF (a bare LF is refused: a request framed differently by
// another parser is a smuggling vector). Pure of I/O, so it is tested and fuzzed on its own.
class ChunkedBodyDecoder {
 public:
  enum class Outcome {
    kIncomplete,  // everything given was used; more bytes are needed
    kComplete,    // the body ended; bytes after it were not used
    kError,       // status() and error() say what is wrong
  };

  explicit ChunkedBodyDecoder(size_t max_body_bytes, size_t max_line_bytes = 4096,
                              size_t max_trailer_bytes = 8192)
      : max_body_bytes_(max_body_bytes), max_line_bytes_(max_line_bytes), max_trailer_bytes_(max_trailer_bytes) {}

  // Decodes from `in`, appending data to *body and setting *used to the number of bytes of `in`
  // consumed. After kComplete or kError, further calls return the same outcome and use nothing.
  Outcome Feed(std::string_view in, size_t* used, std::string* body);

  int status() const { return status_; }  // 400 malformed, 413 over the limit
  const std::string& error() const { return error_; }
  uint64_t decoded() const { return decoded_; }

 private:
  enum class State { kSizeLine, kData, kDataEnd, kTrailer, kDone, kFailed };
  Outcome Fail(int status, std::string error);
  // A framing line from `line_`: the chunk size line, or a trailer line.
  Outcome OnSizeLine();

  const size_t max_body_bytes_;
  const size_t max_line_bytes_;
  const size_t max_trailer_bytes_;
  State state_ = State::kSizeLine;
  std::string line_;         // the framing line read so far (without its CRLF)
  uint64_t chunk_left_ = 0;  // data bytes of the current chunk still to come
  uint64_t decoded_ = 0;
  size_t trailer_bytes_ = 0;
  int status_ = 0;
  std::string error_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_TRANSPORT_REQUEST_BODY_H_
