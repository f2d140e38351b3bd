#include "server/hub/http_transfer.h"

#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "httplib.h"

namespace relserve {
namespace {

using ::testing::HasSubstr;

TEST(UrlTest, Origins) {
  EXPECT_EQ(UrlOrigin("https://huggingface.co"), "https://huggingface.co:443");
  EXPECT_EQ(UrlOrigin("https://HuggingFace.co/api/models?x=1"), "https://huggingface.co:443");
  EXPECT_EQ(UrlOrigin("http://127.0.0.1:8080/a"), "http://127.0.0.1:8080");
  EXPECT_EQ(UrlOrigin("http://user:pw@host/a"), "http://host:80");
  EXPECT_EQ(UrlOrigin("http://[::1]/a"), "http://[::1]:80");
  EXPECT_EQ(UrlOrigin("http://[::1]:9/a"), "http://[::1]:9");
  EXPECT_EQ(UrlOrigin("ftp://host/a"), "");
  EXPECT_EQ(UrlOrigin("/relative"), "");
  // The CDN is another origin than the Hub, and so is another port.
  EXPECT_NE(UrlOrigin("https://cdn-lfs.huggingface.co/x"), UrlOrigin("https://huggingface.co"));
  EXPECT_NE(UrlOrigin("http://127.0.0.1:1/x"), UrlOrigin("http://127.0.0.1:2"));
}

TEST(UrlTest, ResolvingLocations) {
  const std::string base = "https://hub.example/org/repo/resolve/main/config.json?x=1";
  EXPECT_EQ(ResolveUrl(base, "https://cdn.example/blob?sig=1"), "https://cdn.example/blob?sig=1");
  EXPECT_EQ(ResolveUrl(base, "/org/new/resolve/main/config.json"), "https://hub.example/org/new/resolve/main/config.json");
  EXPECT_EQ(ResolveUrl(base, "//cdn.example/b"), "https://cdn.example/b");
  EXPECT_EQ(ResolveUrl(base, "other.json"), "https://hub.example/org/repo/resolve/main/other.json");
  EXPECT_EQ(ResolveUrl("http://h:1", "/x"), "http://h:1/x");
}

TEST(UrlTest, Encoding) {
  EXPECT_EQ(UrlEncode("refs/pr/1", false), "refs%2Fpr%2F1");
  EXPECT_EQ(UrlEncode("1_Pooling/config.json", true), "1_Pooling/config.json");
  EXPECT_EQ(UrlEncode("a b+c~d", true), "a%20b%2Bc~d");
}

class HttpTransferTest : public ::testing::Test {
 protected:
  void SetUp() override {
    server_.Get("/text", [](const httplib::Request&, httplib::Response& res) { res.set_content("hello", "text/plain"); });
    server_.Get("/error", [](const httplib::Request&, httplib::Response& res) {
      res.status = 503;
      res.set_header("X-Error-Code", "Busy");
      res.set_content("try later", "text/plain");
    });
    server_.Get("/slow", [](const httplib::Request&, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      res.set_content("late", "text/plain");
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }
  std::string Url(const std::string& path) const { return "http://127.0.0.1:" + std::to_string(port_) + path; }

  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
};

TEST_F(HttpTransferTest, BodiesHeadersAndErrorAnswers) {
  HttpRequest request;
  request.url = Url("/text");
  absl::StatusOr<HttpResponse> r = PerformHttp(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->body, "hello");
  EXPECT_EQ(r->Header("content-length"), "5");

  request.url = Url("/error");
  r = PerformHttp(request);
  ASSERT_TRUE(r.ok()) << r.status();  // an HTTP status is an answer, not a transport failure
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->Header("x-error-code"), "Busy");
  EXPECT_EQ(r->body, "try later");

  std::string streamed;
  request.url = Url("/text");
  request.range_start = 2;
  request.on_body = [&streamed](const char* d, size_t n) {
    streamed.append(d, n);
    return true;
  };
  r = PerformHttp(request);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->status, 206);
  EXPECT_EQ(r->Header("content-range"), "bytes 2-4/5");
  EXPECT_EQ(streamed, "llo");
}

TEST_F(HttpTransferTest, TransportFailuresAreUnavailable) {
  HttpRequest request;
  request.url = Url("/slow");
  request.total_timeout = absl::Milliseconds(300);
  absl::StatusOr<HttpResponse> r = PerformHttp(request);
  ASSERT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
  EXPECT_THAT(r.status().message(), HasSubstr("GET " + Url("/slow") + " failed"));

  request.url = "http://127.0.0.1:1/nothing";
  r = PerformHttp(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kUnavailable) << r.status();
}

TEST_F(HttpTransferTest, CancellationStopsAWait) {
  HttpRequest request;
  request.url = Url("/slow");
  const absl::Time start = absl::Now();
  request.cancelled = [start] { return absl::Now() - start > absl::Milliseconds(200); };
  absl::StatusOr<HttpResponse> r = PerformHttp(request);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kCancelled) << r.status();
  EXPECT_LT(absl::Now() - start, absl::Milliseconds(2500));
}

}  // namespace
}  // namespace relserve
