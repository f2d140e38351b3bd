// Fuzzes the HTTP server with whole requests, framing included: the input is sent as it is on
// one connection to a running WebServer, whose answers must be well-formed HTTP/1.1 responses,
// one per request at most, and the server must go on serving. Behind it, an echo handler reads
// every JSON body as the API's routes do (ParseJsonObject): deep nesting, huge values and bad
// UTF-8 must give a bounded error, never a crash.
// The pure parsers are checked on the same bytes: the head parser, the framing decision and
// the chunked decoder fed in two pieces, which must decode exactly as fed whole.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>

#include "server/http_api/json_fields.h"
#include "server/http_transport/http_request.h"
#include "server/http_transport/request_body.h"
#include "server/http_transport/web_server.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using relserve::BodyFraming;
using relserve::ChunkedBodyDecoder;
using relserve::HttpRequestParse;

constexpr size_t kMaxHead = 4096;
constexpr size_t kMaxBody = 65536;

relserve::WebServer* Server() {
  static relserve::WebServer* server = [] {
    relserve::WebServerConfig config;
    config.address = "127.0.0.1";
    config.port = 0;
    config.max_head_bytes = kMaxHead;
    config.max_body_bytes = kMaxBody;
    config.head_timeout = std::chrono::milliseconds(1000);
    config.body_timeout = std::chrono::milliseconds(1000);
    config.handler_threads = 2;
    relserve::WebHandlers handlers;
    handlers.handle = [](const relserve::WebRequest& r, const std::shared_ptr<const std::atomic<bool>>&) {
      relserve::WebResponse out;
      out.content_type = "text/plain";
      out.body = r.head.method + " " + r.head.path + " " + std::to_string(r.body.size());
      const auto type = r.Header("content-type");
      if (type.has_value() && type->find("json") != std::string_view::npos) {
        const auto parsed = relserve::ParseJsonObject(r.body);
        const std::string message(parsed.status().message());
        FUZZ_CHECK(message.size() <= 4096, "a %zu-byte error message", message.size());
        out.body += parsed.ok() ? " json" : " " + message;
      }
      return out;
    };
    auto started = relserve::WebServer::Start(config, std::move(handlers));
    FUZZ_CHECK(started.ok(), "%s", started.status().ToString().c_str());
    return started->release();
  }();
  return server;
}

int Connect(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  FUZZ_CHECK(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0, "cannot connect");
  return fd;
}

// Sends `data` (reading what comes back meanwhile, so neither side blocks), half-closes, and
// reads until the server closes. Returns everything the server sent.
std::string Exchange(int port, std::string_view data) {
  const int fd = Connect(port);
  std::string got;
  size_t sent = 0;
  bool shut = false;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  for (;;) {
    if (!shut && sent == data.size()) {
      ::shutdown(fd, SHUT_WR);
      shut = true;
    }
    pollfd p{fd, static_cast<short>(POLLIN | (shut ? 0 : POLLOUT)), 0};
    FUZZ_CHECK(std::chrono::steady_clock::now() < deadline, "the server neither answered nor closed in 5 s");
    if (::poll(&p, 1, 100) <= 0) continue;
    if (p.revents & POLLIN) {
      char buf[8192];
      const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
      if (n <= 0) break;
      got.append(buf, static_cast<size_t>(n));
    }
    if (!shut && (p.revents & POLLOUT)) {
      const ssize_t n = ::send(fd, data.data() + sent, std::min<size_t>(data.size() - sent, 65536),
                               MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n > 0) {
        sent += static_cast<size_t>(n);
      } else if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) {
        shut = true;  // the server closed on us (a refused request); read what it said
      }
    }
    if (p.revents & (POLLHUP | POLLERR)) break;
  }
  ::close(fd);
  return got;
}

// Checks that `wire` is a sequence of complete responses; returns how many.
size_t CheckResponses(const std::string& wire) {
  size_t pos = 0, count = 0;
  while (pos < wire.size()) {
    FUZZ_CHECK(wire.compare(pos, 9, "HTTP/1.1 ") == 0, "response %zu does not start with HTTP/1.1", count);
    const size_t end = wire.find("\r\n\r\n", pos);
    FUZZ_CHECK(end != std::string::npos, "response %zu has no end of head", count);
    const std::string head = wire.substr(pos, end - pos);
    const int status = std::atoi(head.c_str() + 9);
    FUZZ_CHECK(status >= 100 && status < 600, "status %d", status);
    pos = end + 4;
    if (status == 100) continue;  // interim: the final response follows
    const size_t cl = head.find("Content-Length: ");
    FUZZ_CHECK(cl != std::string::npos, "response %zu has no Content-Length", count);
    const size_t length = static_cast<size_t>(std::strtoull(head.c_str() + cl + 16, nullptr, 10));
    if (head.find("HEAD ") == std::string::npos) {
      // A HEAD answer has no body; the echo's body never names "HEAD " in a header, so a body
      // shorter than the length can only be a HEAD answer at the end of the stream.
      pos += std::min(length, wire.size() - pos);
    }
    ++count;
  }
  return count;
}

void CheckParsers(std::string_view in) {
  size_t pos = 0;
  for (int requests = 0; requests < 64 && pos < in.size(); ++requests) {
    const HttpRequestParse parse = relserve::ParseHttpRequestHead(in.substr(pos), kMaxHead);
    if (parse.outcome != HttpRequestParse::Outcome::kComplete) return;
    FUZZ_CHECK(parse.head.size > 0 && parse.head.size <= in.size() - pos, "head size %zu", parse.head.size);
    pos += parse.head.size;
    const BodyFraming f = relserve::DecideBodyFraming(parse.head, kMaxBody);
    if (f.kind == BodyFraming::Kind::kError) {
      FUZZ_CHECK(f.status == 400 || f.status == 413 || f.status == 501, "framing status %d", f.status);
      return;
    }
    if (f.kind == BodyFraming::Kind::kLength) {
      FUZZ_CHECK(f.length <= kMaxBody, "length %llu over the limit", static_cast<unsigned long long>(f.length));
      if (f.length > in.size() - pos) return;
      pos += f.length;
    } else if (f.kind == BodyFraming::Kind::kChunked) {
      ChunkedBodyDecoder whole(kMaxBody), split(kMaxBody);
      std::string a, b;
      size_t used_whole = 0, used1 = 0, used2 = 0;
      const std::string_view rest = in.substr(pos);
      const auto o = whole.Feed(rest, &used_whole, &a);
      const size_t cut = rest.size() / 2;
      auto o2 = split.Feed(rest.substr(0, cut), &used1, &b);
      if (o2 == ChunkedBodyDecoder::Outcome::kIncomplete) {
        FUZZ_CHECK(used1 == cut, "an incomplete feed used %zu of %zu", used1, cut);
        o2 = split.Feed(rest.substr(cut), &used2, &b);
      }
      FUZZ_CHECK(o == o2, "whole and split feeds disagree");
      FUZZ_CHECK(a == b, "whole and split feeds decode differently");
      FUZZ_CHECK(a.size() <= kMaxBody, "decoded %zu bytes over the limit", a.size());
      if (o != ChunkedBodyDecoder::Outcome::kComplete) return;
      FUZZ_CHECK(used_whole == used1 + used2, "used %zu vs %zu", used_whole, used1 + used2);
      pos += used_whole;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  CheckParsers(input);
  relserve::WebServer* server = Server();
  const std::string answers = Exchange(server->port(), input);
  const size_t responses = CheckResponses(answers);
  // Every request gets at most one response (a request is at least "A / HTTP/1.1\n\n").
  FUZZ_CHECK(responses <= size / 14 + 1, "%zu responses to %zu bytes", responses, size);
  // The server goes on serving.
  const std::string probe = Exchange(server->port(), "GET /alive HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  FUZZ_CHECK(probe.find("GET /alive 0") != std::string::npos, "the server stopped serving: %s", probe.c_str());
  return 0;
}
