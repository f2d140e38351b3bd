// A minimal server on one of two HTTP stacks, for scripts/bench-http-stacks.sh to put under the
// same slow-client attack: the project's WebServer (server/http_transport) or cpp-httplib 0.11 (the stack
// the API port ran before), each with 64 handler threads, serving GET /health and POST /work,
// which holds its thread for 5 ms (a batch's wait) and answers the body's size.
//   http_stack_bench web|httplib PORT
#include <httplib.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "server/http_transport/web_server.h"

namespace {

volatile std::sig_atomic_t stop = 0;

void OnSignal(int) { stop = 1; }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s web|httplib PORT\n", argv[0]);
    return 2;
  }
  const std::string stack = argv[1];
  const int port = std::atoi(argv[2]);
  std::signal(SIGTERM, OnSignal);
  std::signal(SIGINT, OnSignal);
  std::signal(SIGPIPE, SIG_IGN);  // as relserve does
  if (stack == "web") {
    relserve::WebServerConfig config;
    config.address = "127.0.0.1";
    config.port = port;
    config.handler_threads = 64;
    relserve::WebHandlers handlers;
    handlers.handle = [](const relserve::WebRequest& r, const std::shared_ptr<const std::atomic<bool>>&) {
      if (r.head.path == "/work") std::this_thread::sleep_for(std::chrono::milliseconds(5));
      relserve::WebResponse out;
      out.content_type = "text/plain";
      out.body = std::to_string(r.body.size());
      return out;
    };
    auto server = relserve::WebServer::Start(config, std::move(handlers));
    if (!server.ok()) {
      std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
      return 1;
    }
    std::printf("listening\n");
    std::fflush(stdout);
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    (*server)->Stop();
    return 0;
  }
  if (stack == "httplib") {
    httplib::Server s;
    s.new_task_queue = [] { return new httplib::ThreadPool(64); };
    s.set_payload_max_length(16 << 20);  // as the API port configured it
    s.Get("/health", [](const httplib::Request&, httplib::Response& res) { res.set_content("0", "text/plain"); });
    s.Post("/work", [](const httplib::Request& req, httplib::Response& res) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      res.set_content(std::to_string(req.body.size()), "text/plain");
    });
    if (!s.bind_to_port("127.0.0.1", port)) return 1;
    std::thread listener([&] { s.listen_after_bind(); });
    std::printf("listening\n");
    std::fflush(stdout);
    while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    s.stop();
    listener.join();
    return 0;
  }
  std::fprintf(stderr, "unknown stack %s\n", stack.c_str());
  return 2;
}
