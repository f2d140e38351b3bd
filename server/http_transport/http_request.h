#ifndef RELSERVE_SERVER_HTTP_TRANSPORT_HTTP_REQUEST_H_
#define RELSERVE_SERVER_HTTP_TRANSPORT_HTTP_REQUEST_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace relserve {

// The head of an HTTP/1.x request (RFC 9112): request line and header fields.
struct HttpRequestHead {
  std::string method;  // a token, case-sensitive ("GET", "HEAD", ...)
  std::string target;  // the request-target exactly as sent
  // The path the target names: origin-form as is, absolute-form ("http://host/p") reduced to
  // its path ("/p"), "*" kept; the query and fragment are removed.
  std::string path;
  int minor_version = 1;  // HTTP/1.<minor_version>
  // Field lines in order: names as sent, values without surrounding whitespace.
  std::vector<std::pair<std::string, std::string>> headers;
  size_t size = 0;  // bytes of the head, the empty line that ends it included
};

// What the bytes received so far on a connection amount to.
struct HttpRequestParse {
  enum class Outcome {
    kIncomplete,  // valid so far; more bytes are needed
    kComplete,    // `head` holds the request; `head.size` bytes were used
    kError,       // `status` and `error` say what is wrong; answer and close
  };
  Outcome outcome = Outcome::kIncomplete;
  HttpRequestHead head;
  // On kError: 400 (malformed), 414 (request line over the limit), 431 (head over the limit)
  // or 505 (an HTTP version other than 1.x).
  int status = 0;
  std::string error;  // one line naming the part that is wrong and, for limits, the limit
};

// Parses the request head at the start of `bytes` (everything the client has sent so far).
// A pure function of its input, so that it can be tested and fuzzed on its own; it is called
// again with the longer input whenever more bytes arrive.
//
// Rules (RFC 9112 unless noted):
// - Empty lines before the request line are skipped (2.2). Lines end with CRLF or a bare LF;
//   a CR anywhere else is an error (2.2).
// - The request line is exactly `method SP request-target SP HTTP/DIGIT.DIGIT`; the method
//   is a token, the target has no control characters or spaces (3). HTTP/1.x only: another
//   version is 505.
// - Each field line is `name ":" OWS value OWS`; the name is a token with no whitespace
//   before the colon (5.1), the value has no control characters other than HTAB (RFC 9110
//   5.5). Obsolete line folding (a line starting with whitespace) is refused (5.2).
// - Errors show as soon as the bytes prove them: a first line whose method part holds a
//   non-token byte (a TLS handshake, binary junk) is refused before its line ends.
// - Limits: a request line longer than `max_head_bytes` is 414; a head (request line, fields
//   and the empty line) longer than `max_head_bytes` is 431.
// A body, if the client sends one, is not looked at.
HttpRequestParse ParseHttpRequestHead(std::string_view bytes, size_t max_head_bytes);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_TRANSPORT_HTTP_REQUEST_H_
