#ifndef RELSERVE_TESTS_SERVER_SERVER_TEST_ENV_H_
#define RELSERVE_TESTS_SERVER_SERVER_TEST_ENV_H_

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "relserve/v1/encoder.grpc.pb.h"
#include "server/main/relserve_server.h"
#include "server/main/server_config.h"

namespace relserve::testing {

// Small models made by the creator (with the bundled tokenizer), in a scratch folder:
// "embedder" (DeBERTa-v3 + sentence-transformers mean pooling + Normalize),
// "reranker" (DeBERTa-v3 with a 1-label head), "classifier" (3 labels), "t5" (T5 encoder).
class TestModels {
 public:
  static const TestModels& Get();  // created once per process
  std::string dir(const std::string& name) const { return root_ + "/" + name; }

 private:
  TestModels();
  std::string root_;
};

// A server on loopback ports chosen by the kernel, with every test model.
ServerConfig TestServerConfig();

std::unique_ptr<v1::Encoder::Stub> Connect(int port);

// Calls `method` ("/relserve.v1.Encoder/Embed") with `wire` as the request bytes, as they are;
// the response bytes go to *response when given.
grpc::Status RawUnary(int port, const std::string& method, const std::string& wire, std::string* response = nullptr);

// Polls `condition` every `poll` until it holds or `within` has passed; its last value.
bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds within,
               std::chrono::milliseconds poll = std::chrono::milliseconds(20));

// How often `needle` occurs in `haystack` (overlapping occurrences included).
int CountOccurrences(const std::string& haystack, const std::string& needle);

// GET http://127.0.0.1:port/path; returns the body, or "" on failure. Sets *status_code.
std::string HttpGet(int port, const std::string& path, int* status_code);

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_SERVER_SERVER_TEST_ENV_H_
