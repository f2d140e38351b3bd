#include "tests/server/server_test_env.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <filesystem>
#include <stdexcept>

#include <grpcpp/generic/generic_stub.h>

#include "server/tools/model_creator.h"
#include "server/util/file_util.h"

namespace relserve::testing {

namespace {
void Create(const std::string& dir, const std::string& family, int labels, bool st,
            const nlohmann::json& overrides = nlohmann::json::object(),
            const std::string& vocab_file = "/reference/tokenizer/spm.model") {
  CreateModelOptions o;
  o.family = family;
  o.hidden = 32;
  o.layers = 2;
  o.heads = 4;
  o.intermediate = 64;
  o.num_labels = labels;
  o.sentence_transformers = st;
  o.vocab_file = std::string(RELSERVE_TEST_DATA_DIR) + vocab_file;
  o.seed = 11;
  if (family == "deberta-v3") o.config_overrides = nlohmann::json{{"position_buckets", 32}};
  o.config_overrides.update(overrides);
  auto s = CreateModelDirectory(o, dir);
  if (!s.ok()) throw std::runtime_error(std::string(s.message()));
}
}  // namespace

TestModels::TestModels() {
  std::string tmpl = (std::filesystem::temp_directory_path() / "relserve-server-test-XXXXXX").string();
  if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp");
  root_ = tmpl;
  Create(dir("embedder"), "deberta-v3", 0, true);
  Create(dir("reranker"), "deberta-v3", 1, false);
  Create(dir("classifier"), "deberta-v3", 3, false);
  Create(dir("t5"), "t5", 0, false);
  // An NLI cross-encoder (zero-shot classification): MNLI's label names.
  Create(dir("nli"), "deberta-v3", 3, false,
         nlohmann::json{{"id2label", {{"0", "contradiction"}, {"1", "neutral"}, {"2", "entailment"}}},
                        {"label2id", {{"contradiction", 0}, {"entailment", 2}, {"neutral", 1}}}});
  // A SPLADE model: BERT with its masked-LM head, WordPiece vocabulary.
  Create(dir("splade"), "bert", 0, false, nlohmann::json{{"architectures", {"BertForMaskedLM"}}},
         "/reference/tokenizer_wordpiece/vocab_uncased.txt");
  std::atexit([] { RemoveTree(Get().root_); });
}

const TestModels& TestModels::Get() {
  static const TestModels* models = new TestModels();
  return *models;
}

ServerConfig TestServerConfig() {
  const TestModels& m = TestModels::Get();
  ServerConfig c;
  for (const char* name : {"embedder", "reranker", "classifier", "t5"}) c.models.emplace_back(name, m.dir(name));
  c.grpc_address = "127.0.0.1:0";
  c.metrics_address = "127.0.0.1";
  c.metrics_port = 0;
  c.http_address = "127.0.0.1:0";
  c.max_queue_delay_us = 1000;
  c.warmup = false;
  c.shutdown_grace_seconds = 5;
  // Two workers on every machine, so that every service test also runs batches side by side.
  c.workers_per_device = 2;
  c.threads_per_worker = 1;
  // --auto-truncate false (the default is true, as TEI 1.9's): the service tests check refusals
  // of over-long inputs; the tests of the default start servers without this line.
  c.auto_truncate = false;
  return c;
}

std::unique_ptr<v1::Encoder::Stub> Connect(int port) {
  return v1::Encoder::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

grpc::Status RawUnary(int port, const std::string& method, const std::string& wire, std::string* response) {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  grpc::GenericStub generic(channel);
  grpc::Slice slice(wire);
  grpc::ByteBuffer request(&slice, 1), reply;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, method, grpc::StubOptions(), &request, &reply, [&](grpc::Status s) {
    std::lock_guard<std::mutex> l(mu);
    status = s;
    done = true;
    cv.notify_one();
  });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  if (response != nullptr) {
    std::vector<grpc::Slice> slices;
    response->clear();
    if (reply.Dump(&slices).ok()) {
      for (const grpc::Slice& s : slices) response->append(reinterpret_cast<const char*>(s.begin()), s.size());
    }
  }
  return status;
}

bool WaitUntil(const std::function<bool()>& condition, std::chrono::milliseconds within,
               std::chrono::milliseconds poll) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(poll);
  }
  return condition();
}

int CountOccurrences(const std::string& haystack, const std::string& needle) {
  int n = 0;
  for (size_t pos = haystack.find(needle); pos != std::string::npos; pos = haystack.find(needle, pos + 1)) ++n;
  return n;
}

std::string HttpGet(int port, const std::string& path, int* status_code) {
  *status_code = 0;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
  if (write(fd, req.data(), req.size()) < 0) {
    close(fd);
    return "";
  }
  std::string resp;
  char buf[8192];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) resp.append(buf, static_cast<size_t>(n));
  close(fd);
  if (resp.rfind("HTTP/1.", 0) == 0 && resp.size() > 12) *status_code = std::atoi(resp.substr(9, 3).c_str());
  const auto body = resp.find("\r\n\r\n");
  return body == std::string::npos ? "" : resp.substr(body + 4);
}

}  // namespace relserve::testing
