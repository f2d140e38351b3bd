// Generic tools discover relserve's API through server reflection. This runs the relserve
// binary (so that this process need not link gRPC's own copy of the reflection protocol).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/reflection/reflection.grpc.pb.h"

namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
using ::testing::Contains;

// The status of relserve.v1.Encoder/ListModels called without credentials.
grpc::StatusCode ListModelsCode(const std::shared_ptr<grpc::Channel>& channel) {
  grpc::GenericStub generic(channel);
  grpc::Slice empty(std::string{});  // an empty ListModelsRequest
  grpc::ByteBuffer request(&empty, 1), response;
  grpc::ClientContext ctx;
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  grpc::Status status;
  generic.UnaryCall(&ctx, "/relserve.v1.Encoder/ListModels", grpc::StubOptions(), &request, &response,
                    [&](grpc::Status s) {
                      std::lock_guard<std::mutex> l(mu);
                      status = s;
                      done = true;
                      cv.notify_one();
                    });
  std::unique_lock<std::mutex> l(mu);
  cv.wait(l, [&] { return done; });
  return status.error_code();
}

// Runs relserve with `extra_flags` and checks that reflection lists and describes the API
// (with no credentials of any kind), while the Encoder's own calls answer `encoder_code`.
void ExpectReflectionDescribesTheApi(const std::vector<std::string>& extra_flags, grpc::StatusCode encoder_code) {
  // A fresh file: the port is read from it, and an old one would name an old port.
  const std::string log_path = ::testing::TempDir() + "relserve-reflection-" + std::to_string(getpid()) + ".log";
  std::remove(log_path.c_str());
  std::vector<std::string> args = {RELSERVE_BINARY, "--model", "ref=" RELSERVE_TEST_MODEL, "--grpc-address",
                                   "127.0.0.1:0", "--http-address", "127.0.0.1:0", "--metrics-port", "-1",
                                   "--warmup", "false", "--shutdown-grace-seconds", "5"};
  args.insert(args.end(), extra_flags.begin(), extra_flags.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* log = std::freopen(log_path.c_str(), "w", stderr);
    FILE* out = std::freopen("/dev/null", "w", stdout);
    (void)log;
    (void)out;
    execv(RELSERVE_BINARY, argv.data());
    _exit(127);
  }
  // Whatever happens below, the server does not outlive the test.
  struct KillOnExit {
    pid_t pid;
    ~KillOnExit() {
      if (kill(pid, 0) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } guard{pid};
  int port = 0;
  for (int i = 0; i < 1200 && port == 0; ++i) {
    std::ifstream in(log_path);
    std::stringstream ss;
    ss << in.rdbuf();
    std::smatch m;
    const std::string log = ss.str();
    if (std::regex_search(log, m, std::regex("on port ([0-9]+)"))) port = std::stoi(m[1]);
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ASSERT_GT(port, 0);

  {
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
  EXPECT_EQ(ListModelsCode(channel), encoder_code);
  auto stub = ServerReflection::NewStub(channel);
  grpc::ClientContext ctx;
  auto stream = stub->ServerReflectionInfo(&ctx);
  ServerReflectionRequest list;
  list.set_list_services("*");
  ASSERT_TRUE(stream->Write(list));
  ServerReflectionResponse resp;
  ASSERT_TRUE(stream->Read(&resp));
  std::vector<std::string> services;
  for (const auto& s : resp.list_services_response().service()) services.push_back(s.name());
  EXPECT_THAT(services, Contains("relserve.v1.Encoder"));
  EXPECT_THAT(services, Contains("grpc.health.v1.Health"));

  ServerReflectionRequest symbol;
  symbol.set_file_containing_symbol("relserve.v1.Encoder");
  ASSERT_TRUE(stream->Write(symbol));
  ASSERT_TRUE(stream->Read(&resp));
  ASSERT_GT(resp.file_descriptor_response().file_descriptor_proto_size(), 0);
  google::protobuf::FileDescriptorProto file;
  ASSERT_TRUE(file.ParseFromString(resp.file_descriptor_response().file_descriptor_proto(0)));
  EXPECT_EQ(file.package(), "relserve.v1");
  std::vector<std::string> methods;
  for (const auto& m : file.service(0).method()) methods.push_back(m.name());
  EXPECT_THAT(methods, Contains("Rerank"));
  EXPECT_THAT(methods, Contains("EmbedStream"));
  stream->WritesDone();
  EXPECT_TRUE(stream->Finish().ok());
  }

  kill(pid, SIGTERM);
  int status = 0;
  waitpid(pid, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

TEST(ReflectionTest, ListsTheServicesAndDescribesTheApi) { ExpectReflectionDescribesTheApi({}, grpc::StatusCode::OK); }

// API keys guard the Encoder's calls, not the description of the API.
TEST(ReflectionTest, OpenWhenApiKeysAreRequired) {
  ExpectReflectionDescribesTheApi({"--api-key", "reflection-test-key"}, grpc::StatusCode::UNAUTHENTICATED);
}

}  // namespace
