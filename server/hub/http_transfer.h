#ifndef RELSERVE_SERVER_HUB_HTTP_TRANSFER_H_
#define RELSERVE_SERVER_HUB_HTTP_TRANSFER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace relserve {

// One HTTP exchange through libcurl, redirects not followed (the caller decides where a
// Location may take the token). Thread-compatible: each call has its own handle.
struct HttpRequest {
  std::string method = "GET";  // GET or HEAD
  std::string url;
  std::vector<std::string> headers;  // "Name: value"
  // > 0: ask for the bytes from this offset on ("Range: bytes=N-").
  int64_t range_start = 0;
  // The whole exchange must end within this (metadata requests); zero: no limit.
  absl::Duration total_timeout = absl::ZeroDuration();
  // Fails (UNAVAILABLE) when no body byte arrives for this long, checked about once a second
  // (downloads); zero: no limit.
  absl::Duration stall_timeout = absl::ZeroDuration();
  absl::Duration connect_timeout = absl::Seconds(10);
  // For 2xx answers: called once, before the first byte of the body, with the status and the
  // headers; false aborts the transfer (a FAILED_PRECONDITION result). May be empty.
  std::function<bool(long status, const std::map<std::string, std::string>& headers)> on_start;
  // For 2xx answers: receives the body as it arrives; false aborts (DATA_LOSS). Empty: the
  // body is collected in HttpResponse::body (up to 64 MiB). Other answers' bodies are always
  // collected (up to 64 KiB), for error messages.
  std::function<bool(const char* data, size_t size)> on_body;
  // Polled about once a second and at every chunk; true aborts the transfer (CANCELLED).
  std::function<bool()> cancelled;
};

struct HttpResponse {
  long status = 0;
  std::map<std::string, std::string> headers;  // names in lower case; the last value wins
  std::string body;
  int64_t body_bytes = 0;  // bytes of the body received (also those handed to on_body)
  std::string Header(const std::string& lower_case_name) const;
};

// Performs `request`. Any HTTP status is a response; the status is an error only when no
// complete answer came: UNAVAILABLE for a transport failure (cannot connect, timeout, the
// connection closed before the body was complete), with `body_bytes` of the partial answer
// then lost to the caller's on_body; CANCELLED, DATA_LOSS, FAILED_PRECONDITION as above.
// `partial_bytes`, when given, receives the body bytes delivered even on failure.
absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request, int64_t* partial_bytes = nullptr);

// The scheme, host and port of an absolute http(s) URL ("https://huggingface.co:443"), with
// the default port written out; "" for anything else. Two URLs are the same origin when these
// are equal.
std::string UrlOrigin(const std::string& url);
// `location` (a Location header) resolved against `base`: absolute URLs as they are,
// "/path" on base's origin, anything else relative to base's folder.
std::string ResolveUrl(const std::string& base, const std::string& location);
// Percent-encodes everything but unreserved characters, and '/' where `keep_slash`.
std::string UrlEncode(const std::string& text, bool keep_slash);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_HTTP_TRANSFER_H_
