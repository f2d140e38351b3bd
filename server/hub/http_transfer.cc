#include "server/hub/http_transfer.h"

#include <curl/curl.h>

#include <algorithm>
#include <mutex>

#include "absl/time/clock.h"

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

constexpr size_t kMaxCollectedBody = 64u << 20;   // metadata answers
constexpr size_t kMaxCollectedError = 64u << 10;  // error answers, for their message

void GlobalInitOnce() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

struct Transfer {
  const HttpRequest* request = nullptr;
  CURL* curl = nullptr;
  HttpResponse response;
  bool started = false;    // the first body byte (or the end) has been seen
  bool streaming = false;  // the body goes to on_body
  size_t collect_limit = kMaxCollectedError;
  bool refused_by_start = false;
  bool refused_by_body = false;
  bool body_too_large = false;
  bool cancelled = false;
  bool stalled = false;
  absl::Time last_data = absl::Now();  // the start, then the last body bytes
};

bool IsSuccess(long status) { return status >= 200 && status < 300; }

// Decides, at the first byte of the body, where the body goes.
bool Start(Transfer* t) {
  t->started = true;
  curl_easy_getinfo(t->curl, CURLINFO_RESPONSE_CODE, &t->response.status);
  if (!IsSuccess(t->response.status)) return true;
  if (t->request->on_start && !t->request->on_start(t->response.status, t->response.headers)) {
    t->refused_by_start = true;
    return false;
  }
  t->streaming = static_cast<bool>(t->request->on_body);
  t->collect_limit = kMaxCollectedBody;
  return true;
}

size_t OnHeader(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  const absl::string_view line(data, bytes);
  if (absl::StartsWith(line, "HTTP/")) {
    t->response.headers.clear();  // a new answer (after 100 Continue)
  } else if (const size_t colon = line.find(':'); colon != absl::string_view::npos) {
    t->response.headers[absl::AsciiStrToLower(absl::StripAsciiWhitespace(line.substr(0, colon)))] =
        std::string(absl::StripAsciiWhitespace(line.substr(colon + 1)));
  }
  return bytes;
}

size_t OnBody(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const size_t bytes = size * count;
  if (!t->started && !Start(t)) return 0;
  if (t->cancelled) return 0;
  if (t->request->cancelled && t->request->cancelled()) {
    t->cancelled = true;
    return 0;
  }
  t->response.body_bytes += static_cast<int64_t>(bytes);
  t->last_data = absl::Now();
  if (t->streaming) {
    if (!t->request->on_body(data, bytes)) {
      t->refused_by_body = true;
      return 0;
    }
    return bytes;
  }
  if (t->response.body.size() + bytes > t->collect_limit) {
    if (IsSuccess(t->response.status)) {
      t->body_too_large = true;
      return 0;
    }
    t->response.body.append(data, t->collect_limit - t->response.body.size());  // enough for a message
    return bytes;
  }
  t->response.body.append(data, bytes);
  return bytes;
}

// Called about once a second, and whenever data moves.
int OnProgress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->request->cancelled && t->request->cancelled()) {
    t->cancelled = true;
    return 1;
  }
  // Not CURLOPT_LOW_SPEED_TIME: libcurl averages the speed over several seconds, so a stall
  // after a fast start would be noticed seconds late.
  if (t->request->stall_timeout > absl::ZeroDuration() && absl::Now() - t->last_data > t->request->stall_timeout) {
    t->stalled = true;
    return 1;
  }
  return 0;
}

// The URL without its query: CDN addresses carry signatures that do not belong in logs.
std::string UrlForMessage(const std::string& url) { return url.substr(0, url.find('?')); }

}  // namespace

std::string HttpResponse::Header(const std::string& lower_case_name) const {
  const auto it = headers.find(lower_case_name);
  return it == headers.end() ? "" : it->second;
}

absl::StatusOr<HttpResponse> PerformHttp(const HttpRequest& request, int64_t* partial_bytes) {
  GlobalInitOnce();
  Transfer t;
  t.request = &request;
  t.curl = curl_easy_init();
  if (t.curl == nullptr) return absl::InternalError("libcurl: cannot create a handle");
  char error[CURL_ERROR_SIZE] = {0};
  curl_slist* headers = nullptr;
  for (const std::string& h : request.headers) headers = curl_slist_append(headers, h.c_str());
  CURL* c = t.curl;
  curl_easy_setopt(c, CURLOPT_URL, request.url.c_str());
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "relserve");
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, OnHeader);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, OnBody);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
  curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, OnProgress);
  curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(request.connect_timeout)));
  if (request.total_timeout > absl::ZeroDuration()) {
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(absl::ToInt64Milliseconds(request.total_timeout)));
  }
  if (request.method == "HEAD") {
    curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
  } else if (request.method != "GET") {
    curl_slist_free_all(headers);
    curl_easy_cleanup(c);
    return absl::InvalidArgumentError(absl::StrCat("unsupported HTTP method ", request.method));
  }
  const std::string range = absl::StrCat(request.range_start, "-");
  if (request.range_start > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());

  const CURLcode code = curl_easy_perform(c);
  if (code == CURLE_OK && !t.started) {
    // No body (HEAD, or an empty one): the status and headers are all there is.
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &t.response.status);
    t.started = true;
    if (IsSuccess(t.response.status) && request.method == "GET" && request.on_start &&
        !request.on_start(t.response.status, t.response.headers)) {
      t.refused_by_start = true;
    }
  }
  curl_slist_free_all(headers);
  curl_easy_cleanup(c);
  if (partial_bytes != nullptr) *partial_bytes = t.response.body_bytes;
  const std::string where = UrlForMessage(request.url);
  if (t.cancelled) return absl::CancelledError(absl::StrCat("cancelled while fetching ", where));
  if (t.stalled) {
    return absl::UnavailableError(absl::StrCat(request.method, " ", where, " failed: no data for ",
                                               absl::FormatDuration(request.stall_timeout), " (after ",
                                               t.response.body_bytes, " bytes of the body)"));
  }
  if (t.refused_by_start) return absl::FailedPreconditionError(absl::StrCat("the answer of ", where, " was refused"));
  if (t.refused_by_body) return absl::DataLossError(absl::StrCat("the body of ", where, " could not be stored"));
  if (t.body_too_large) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": the answer is larger than ", kMaxCollectedBody, " bytes"));
  }
  if (code != CURLE_OK) {
    std::string detail = error[0] != '\0' ? error : curl_easy_strerror(code);
    return absl::UnavailableError(absl::StrCat(request.method, " ", where, " failed: ", detail,
                                               t.response.body_bytes > 0
                                                   ? absl::StrCat(" (after ", t.response.body_bytes, " bytes of the body)")
                                                   : ""));
  }
  return std::move(t.response);
}

std::string UrlOrigin(const std::string& url) {
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string::npos) return "";
  const std::string scheme = absl::AsciiStrToLower(url.substr(0, scheme_end));
  if (scheme != "http" && scheme != "https") return "";
  const size_t start = scheme_end + 3;
  const size_t end = url.find_first_of("/?#", start);
  std::string authority = url.substr(start, end == std::string::npos ? std::string::npos : end - start);
  if (const size_t at = authority.rfind('@'); at != std::string::npos) authority = authority.substr(at + 1);
  authority = absl::AsciiStrToLower(authority);
  if (authority.empty()) return "";
  const size_t bracket = authority.rfind(']');
  const size_t colon = authority.rfind(':');
  const bool has_port = colon != std::string::npos && (bracket == std::string::npos || colon > bracket);
  if (!has_port) absl::StrAppend(&authority, scheme == "https" ? ":443" : ":80");
  return absl::StrCat(scheme, "://", authority);
}

std::string ResolveUrl(const std::string& base, const std::string& location) {
  if (location.find("://") != std::string::npos) return location;
  const size_t scheme_end = base.find("://");
  if (scheme_end == std::string::npos) return location;
  if (location.rfind("//", 0) == 0) return base.substr(0, scheme_end + 1) + location;
  const size_t path_start = base.find_first_of("/?#", scheme_end + 3);
  const std::string origin = base.substr(0, path_start);
  if (!location.empty() && location.front() == '/') return origin + location;
  std::string path = path_start == std::string::npos ? "/" : base.substr(path_start);
  path = path.substr(0, path.find_first_of("?#"));
  return origin + path.substr(0, path.find_last_of('/') + 1) + location;
}

std::string UrlEncode(const std::string& text, bool keep_slash) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (absl::ascii_isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~' || (keep_slash && c == '/')) {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

}  // namespace relserve
