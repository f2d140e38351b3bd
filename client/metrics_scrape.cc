#include "client/metrics_scrape.h"

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace relserve::client {

absl::StatusOr<HttpUrl> ParseHttpUrl(const std::string& url) {
  absl::string_view rest = url;
  if (!absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" is not an http:// URL"));
  }
  HttpUrl out;
  const auto slash = rest.find('/');
  absl::string_view authority = rest.substr(0, slash);
  if (slash != absl::string_view::npos) out.path = std::string(rest.substr(slash));
  absl::string_view port;
  if (absl::ConsumePrefix(&authority, "[")) {  // [::1]:9090
    const auto close = authority.find(']');
    if (close == absl::string_view::npos) return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": unclosed ["));
    out.host = std::string(authority.substr(0, close));
    authority.remove_prefix(close + 1);
    if (absl::ConsumePrefix(&authority, ":")) port = authority;
    else if (!authority.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad host"));
  } else {
    const auto colon = authority.rfind(':');
    out.host = std::string(authority.substr(0, colon));
    if (colon != absl::string_view::npos) port = authority.substr(colon + 1);
  }
  if (out.host.empty()) return absl::InvalidArgumentError(absl::StrCat("\"", url, "\" names no host"));
  if (!port.empty() && (!absl::SimpleAtoi(port, &out.port) || out.port < 1 || out.port > 65535)) {
    return absl::InvalidArgumentError(absl::StrCat("\"", url, "\": bad port"));
  }
  return out;
}

absl::StatusOr<std::string> HttpGet(const HttpUrl& url, int timeout_ms) {
  const std::string where = absl::StrCat(url.host, ":", url.port, url.path);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addresses = nullptr;
  if (int e = getaddrinfo(url.host.c_str(), std::to_string(url.port).c_str(), &hints, &addresses); e != 0) {
    return absl::UnavailableError(absl::StrCat(where, ": ", gai_strerror(e)));
  }
  int fd = -1;
  for (addrinfo* a = addresses; a != nullptr && fd < 0; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd >= 0 && connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(addresses);
  if (fd < 0) return absl::UnavailableError(absl::StrCat(where, ": cannot connect: ", std::strerror(errno)));
  const std::string request =
      absl::StrCat("GET ", url.path, " HTTP/1.1\r\nHost: ", url.host, "\r\nConnection: close\r\n\r\n");
  std::string response;
  bool ok = write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size());
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  char buf[65536];
  while (ok) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    pollfd p{fd, POLLIN, 0};
    if (left.count() <= 0 || poll(&p, 1, static_cast<int>(left.count())) <= 0) {
      ok = false;
      break;
    }
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n <= 0) break;
    response.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  if (!ok) return absl::DeadlineExceededError(absl::StrCat(where, ": no complete answer"));
  if (response.rfind("HTTP/1.", 0) != 0 || response.size() < 12 || response.substr(9, 3) != "200") {
    return absl::UnavailableError(absl::StrCat(where, ": ", response.substr(0, response.find('\r'))));
  }
  const auto body = response.find("\r\n\r\n");
  return body == std::string::npos ? "" : response.substr(body + 4);
}

double SumSamples(const std::string& exposition, const std::string& name) {
  double total = 0;
  for (absl::string_view line : absl::StrSplit(exposition, '\n')) {
    if (!absl::ConsumePrefix(&line, name)) continue;
    if (absl::ConsumePrefix(&line, "{")) {
      const auto close = line.rfind('}');
      if (close == absl::string_view::npos) continue;
      line.remove_prefix(close + 1);
    }
    if (!absl::ConsumePrefix(&line, " ")) continue;  // another series whose name starts with `name`
    const auto space = line.find(' ');              // an optional timestamp follows
    double v;
    if (absl::SimpleAtod(line.substr(0, space), &v)) total += v;
  }
  return total;
}

BatchingCounters ReadBatchingCounters(const std::string& exposition) {
  BatchingCounters c;
  c.tokens = SumSamples(exposition, "relserve_tokens_total");
  c.padded_tokens = SumSamples(exposition, "relserve_padded_tokens_total");
  c.batch_size_sum = SumSamples(exposition, "relserve_batch_size_sum");
  c.batch_size_count = SumSamples(exposition, "relserve_batch_size_count");
  c.requests = SumSamples(exposition, "relserve_requests_total");
  return c;
}

}  // namespace relserve::client
