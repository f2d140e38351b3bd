// Generic tools discover relserve's API through server reflection. This runs the relserve
// binary (so that this process need not link gRPC's own copy of the reflection protocol).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

#include <google/protobuf/descriptor.pb.h>
#include <grpcpp/grpcpp.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/server/reflection/reflection.grpc.pb.h"

namespace {

using grpc::reflection::v1alpha::ServerReflection;
using grpc::reflection::v1alpha::ServerReflectionRequest;
using grpc::reflection::v1alpha::ServerReflectionResponse;
using ::testing::Contains;

TEST(ReflectionTest, ListsTheServicesAndDescribesTheApi) {
  // A fresh file: the port is read from it, and an old one would name an old port.
  const std::string log_path = ::testing::TempDir() + "relserve-reflection-" + std::to_string(getpid()) + ".log";
  std::remove(log_path.c_str());
  const pid_t pid = fork();
  if (pid == 0) {
    FILE* log = std::freopen(log_path.c_str(), "w", stderr);
    FILE* out = std::freopen("/dev/null", "w", stdout);
    (void)log;
    (void)out;
    execl(RELSERVE_BINARY, RELSERVE_BINARY, "--model", "ref=" RELSERVE_TEST_MODEL, "--grpc-address", "127.0.0.1:0", "--http-address", "127.0.0.1:0",
          "--metrics-port", "-1", "--warmup", "false", "--shutdown-grace-seconds", "5", static_cast<char*>(nullptr));
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
  auto stub = ServerReflection::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
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

}  // namespace
