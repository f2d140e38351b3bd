#include "server/http_transport/http_request.h"

#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

namespace relserve {
namespace {

using Outcome = HttpRequestParse::Outcome;

constexpr size_t kMax = 8192;

HttpRequestParse Parse(const std::string& bytes, size_t max = kMax) {
  return ParseHttpRequestHead(bytes, max);
}

// The status of a request the parser refuses; 0 if it does not refuse it.
int ErrorStatus(const std::string& bytes, size_t max = kMax) {
  const HttpRequestParse r = Parse(bytes, max);
  return r.outcome == Outcome::kError ? r.status : 0;
}

TEST(HttpRequestTest, CompleteRequest) {
  const std::string request =
      "GET /metrics?name[]=x HTTP/1.1\r\nHost: localhost:9090\r\nAccept:\t text/plain \r\n"
      "X-Empty:\r\n\r\n";
  const HttpRequestParse r = Parse(request + "trailing body bytes");
  ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
  EXPECT_EQ(r.head.method, "GET");
  EXPECT_EQ(r.head.target, "/metrics?name[]=x");
  EXPECT_EQ(r.head.path, "/metrics");
  EXPECT_EQ(r.head.minor_version, 1);
  EXPECT_EQ(r.head.size, request.size());
  const std::vector<std::pair<std::string, std::string>> headers = {
      {"Host", "localhost:9090"}, {"Accept", "text/plain"}, {"X-Empty", ""}};
  EXPECT_EQ(r.head.headers, headers);
}

TEST(HttpRequestTest, Http10BareLfLeadingEmptyLinesAndAbsoluteForm) {
  HttpRequestParse r = Parse("\r\n\nHEAD /healthz HTTP/1.0\n\n");
  ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
  EXPECT_EQ(r.head.method, "HEAD");
  EXPECT_EQ(r.head.path, "/healthz");
  EXPECT_EQ(r.head.minor_version, 0);

  r = Parse("GET http://10.0.0.1:9090/metrics#frag HTTP/1.1\r\n\r\n");
  ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
  EXPECT_EQ(r.head.path, "/metrics");
  r = Parse("GET http://host?x HTTP/1.1\r\n\r\n");
  ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
  EXPECT_EQ(r.head.path, "/");
  r = Parse("OPTIONS * HTTP/1.1\r\n\r\n");
  ASSERT_EQ(r.outcome, Outcome::kComplete) << r.error;
  EXPECT_EQ(r.head.path, "*");
}

// Every prefix of a valid request is incomplete, never an error: a client may split its
// request anywhere.
TEST(HttpRequestTest, EveryPrefixIsIncomplete) {
  const std::string request = "\r\nGET /metrics HTTP/1.1\r\nHost: x\r\nUser-Agent: probe\r\n\r\n";
  for (size_t n = 0; n < request.size(); ++n) {
    const HttpRequestParse r = Parse(request.substr(0, n));
    EXPECT_EQ(r.outcome, Outcome::kIncomplete) << n << ": " << r.error;
  }
  EXPECT_EQ(Parse(request).outcome, Outcome::kComplete);
}

TEST(HttpRequestTest, MalformedRequestLines) {
  EXPECT_EQ(ErrorStatus("hello there\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET /metrics FTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET  /metrics HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET /metrics HTTP/1.1 \r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("G(T /metrics HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET metrics HTTP/1.1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus(std::string("GET /a\x01 HTTP/1.1\r\n\r\n")), 400);
  EXPECT_EQ(ErrorStatus("GET /metrics HTTP/1.10\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus("GET /metrics\r\n\r\n"), 400);  // HTTP/0.9 style
  const HttpRequestParse v2 = Parse("GET /metrics HTTP/2.0\r\n\r\n");
  EXPECT_EQ(v2.status, 505);
  EXPECT_EQ(v2.error, "HTTP/2.0 is not supported (HTTP/1.x only)");
  EXPECT_EQ(Parse("G(T / HTTP/1.1\r\n\r\n").error, "the method is not a token");
}

TEST(HttpRequestTest, MalformedFieldLines) {
  const std::string line = "GET /metrics HTTP/1.1\r\n";
  EXPECT_EQ(ErrorStatus(line + "no colon here\r\n\r\n"), 400);
  EXPECT_EQ(Parse(line + "no colon here\r\n\r\n").error, "a header field line has no colon");
  EXPECT_EQ(ErrorStatus(line + "Host : x\r\n\r\n"), 400);  // RFC 9112 5.1
  EXPECT_EQ(Parse(line + "Host : x\r\n\r\n").error,
            "whitespace between a header field name and its colon");
  EXPECT_EQ(ErrorStatus(line + "A: 1\r\n folded\r\n\r\n"), 400);  // obsolete line folding
  EXPECT_EQ(ErrorStatus(line + "(bad): 1\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus(line + ": empty name\r\n\r\n"), 400);
  EXPECT_EQ(ErrorStatus(line + std::string("A: x\0y\r\n\r\n", 10)), 400);
  EXPECT_EQ(Parse(line + std::string("A: x\0y\r\n\r\n", 10)).error,
            "header field A contains a control character");
  EXPECT_EQ(ErrorStatus(line + "A: x\ry\r\n\r\n"), 400);  // bare CR
  EXPECT_EQ(ErrorStatus(line + "A: caf\xc3\xa9\r\n\r\n"), 0);  // obs-text is allowed
}

// Binary junk (here a TLS ClientHello) is refused before any line end arrives.
TEST(HttpRequestTest, NonTokenStartIsRefusedAtOnce) {
  EXPECT_EQ(ErrorStatus(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11)), 400);
  EXPECT_EQ(ErrorStatus("\x01"), 400);
  EXPECT_EQ(ErrorStatus("\rX"), 400);
  EXPECT_EQ(ErrorStatus("GET"), 0);
  EXPECT_EQ(ErrorStatus("GET /me"), 0);
  EXPECT_EQ(ErrorStatus("\r"), 0);
}

TEST(HttpRequestTest, Limits) {
  const size_t max = 64;
  // The request line over the limit: 414, whether or not its end has arrived.
  EXPECT_EQ(ErrorStatus("GET /" + std::string(100, 'a') + " HTTP/1.1\r\n\r\n", max), 414);
  EXPECT_EQ(ErrorStatus("GET /" + std::string(100, 'a'), max), 414);
  const HttpRequestParse line = Parse("GET /" + std::string(100, 'a'), max);
  EXPECT_EQ(line.error, "the request line is longer than 64 bytes");
  // The whole head over the limit: 431, complete or not.
  std::string head = "GET / HTTP/1.1\r\n";
  while (head.size() <= max) head += "X-Filler: 0123456789\r\n";
  EXPECT_EQ(ErrorStatus(head, max), 431);
  EXPECT_EQ(ErrorStatus(head + "\r\n", max), 431);
  EXPECT_EQ(Parse(head, max).error, "the request head is longer than 64 bytes");
  // Exactly at the limit is fine; one byte more is not.
  std::string exact = "GET / HTTP/1.1\r\nA: ";
  exact += std::string(max - exact.size() - 4, 'x') + "\r\n\r\n";
  ASSERT_EQ(exact.size(), max);
  EXPECT_EQ(Parse(exact, max).outcome, Outcome::kComplete);
  EXPECT_EQ(ErrorStatus("GET / HTTP/1.1\r\nA: x" + exact.substr(19), max), 431);
  // A body after a head within the limit does not count.
  EXPECT_EQ(Parse("GET / HTTP/1.1\r\n\r\n" + std::string(1000, 'b'), max).outcome,
            Outcome::kComplete);
}

}  // namespace
}  // namespace relserve
