#include "server/http_transport/http_request.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

using Outcome = HttpRequestParse::Outcome;

// tchar of RFC 9110 5.6.2.
bool IsTchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-':
    case '.': case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool IsToken(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), IsTchar); }

bool IsOws(char c) { return c == ' ' || c == '\t'; }

HttpRequestParse Error(int status, std::string error) {
  HttpRequestParse r;
  r.outcome = Outcome::kError;
  r.status = status;
  r.error = std::move(error);
  return r;
}

// Splits "METHOD SP request-target SP HTTP/x.y" into `head`; an error message otherwise.
HttpRequestParse ParseRequestLine(std::string_view line, HttpRequestHead* head) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return Error(400, "the request line is not METHOD SP TARGET SP HTTP-VERSION");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Error(400, "the method is not a token");
  if (target.empty()) return Error(400, "the request target is empty");
  for (char c : target) {
    if (static_cast<unsigned char>(c) <= 0x20 || c == 0x7f) {
      return Error(400, "the request target contains a control character");
    }
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' ||
      version[5] < '0' || version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return Error(400, "the HTTP version is not HTTP/DIGIT.DIGIT");
  }
  if (version[5] != '1') {
    return Error(505, absl::StrCat(std::string(version), " is not supported (HTTP/1.x only)"));
  }

  std::string path(target);
  // absolute-form ("http://host/metrics"): keep the path.
  if (path[0] != '/' && path != "*") {
    const size_t scheme = path.find("://");
    if (scheme == std::string::npos) {
      return Error(400, "the request target is neither a path nor an absolute URI");
    }
    const size_t slash = path.find('/', scheme + 3);
    path = slash == std::string::npos ? "/" : path.substr(slash);
  }
  const size_t query = path.find_first_of("?#");
  if (query != std::string::npos) path.resize(query);
  if (path.empty()) path = "/";  // "http://host?x"

  head->method = std::string(method);
  head->target = std::string(target);
  head->path = std::move(path);
  head->minor_version = version[7] - '0';
  HttpRequestParse ok;
  ok.outcome = Outcome::kIncomplete;
  return ok;
}

// Checks one field line and appends it to `head`.
HttpRequestParse ParseFieldLine(std::string_view line, HttpRequestHead* head) {
  if (IsOws(line[0])) return Error(400, "obsolete line folding in the header fields");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos) return Error(400, "a header field line has no colon");
  const std::string_view name = line.substr(0, colon);
  if (!name.empty() && IsOws(name.back())) {
    return Error(400, "whitespace between a header field name and its colon");
  }
  if (!IsToken(name)) return Error(400, "a header field name is not a token");
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && IsOws(value.front())) value.remove_prefix(1);
  while (!value.empty() && IsOws(value.back())) value.remove_suffix(1);
  for (char c : value) {
    const unsigned char u = static_cast<unsigned char>(c);
    if ((u < 0x20 && c != '\t') || u == 0x7f) {
      return Error(400, absl::StrCat("header field ", std::string(name),
                                     " contains a control character"));
    }
  }
  head->headers.emplace_back(std::string(name), std::string(value));
  HttpRequestParse ok;
  ok.outcome = Outcome::kIncomplete;
  return ok;
}

}  // namespace

HttpRequestParse ParseHttpRequestHead(std::string_view bytes, size_t max_head_bytes) {
  HttpRequestParse result;
  size_t pos = 0;
  // RFC 9112 2.2: empty lines before the request line are ignored.
  while (true) {
    if (bytes.substr(pos, 2) == "\r\n") {
      pos += 2;
    } else if (bytes.substr(pos, 1) == "\n") {
      pos += 1;
    } else {
      break;
    }
  }
  bool have_request_line = false;
  while (true) {
    const size_t nl = bytes.find('\n', pos);
    if (nl == std::string_view::npos) break;
    size_t end = nl;
    if (end > pos && bytes[end - 1] == '\r') --end;
    const std::string_view line = bytes.substr(pos, end - pos);
    pos = nl + 1;
    if (line.find('\r') != std::string_view::npos) {
      return Error(400, "a bare CR inside a line of the request head");
    }
    if (!have_request_line) {
      if (line.size() > max_head_bytes) {
        return Error(414, absl::StrCat("the request line is longer than ", max_head_bytes,
                                       " bytes"));
      }
      HttpRequestParse r = ParseRequestLine(line, &result.head);
      if (r.outcome == Outcome::kError) return r;
      have_request_line = true;
      continue;
    }
    if (line.empty()) {
      if (pos > max_head_bytes) break;  // reported as 431 below
      result.outcome = Outcome::kComplete;
      result.head.size = pos;
      return result;
    }
    HttpRequestParse r = ParseFieldLine(line, &result.head);
    if (r.outcome == Outcome::kError) return r;
  }
  if (!have_request_line) {
    // The method so far must be a token: a TLS handshake or binary junk is refused at once
    // instead of after the read timeout.
    for (size_t i = pos; i < bytes.size() && bytes[i] != ' '; ++i) {
      if (!IsTchar(bytes[i]) && !(bytes[i] == '\r' && i + 1 == bytes.size())) {
        return Error(400, "the request does not start with a method token");
      }
    }
  }
  if (bytes.size() > max_head_bytes) {
    return have_request_line
               ? Error(431, absl::StrCat("the request head is longer than ", max_head_bytes,
                                         " bytes"))
               : Error(414, absl::StrCat("the request line is longer than ", max_head_bytes,
                                         " bytes"));
  }
  result.outcome = Outcome::kIncomplete;
  return result;
}

}  // namespace relserve
