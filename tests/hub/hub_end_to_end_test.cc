// relserve-model and relserve with Hub ids, against a Hub of the tests' own (HF_ENDPOINT) and a
// cache in a scratch folder (HF_HUB_CACHE).
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/hub/hub_cache.h"
#include "server/util/file_util.h"
#include "tests/hub/fake_hub.h"
#include "tests/server/server_process.h"
#include "tests/server/server_test_env.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using testing::FakeHub;
using testing::FakeRepo;

const std::string kRepo = "org/deberta-tiny";

struct Result {
  int exit_code;
  std::string out, err;
};

class HubEndToEndTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/relserve-hub-e2e-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    scratch_ = tmpl;
    cache_dir_ = scratch_ + "/hub";
    main_ = testing::FakeCommitHash("main");
    FakeRepo repo;
    repo.commits[main_] = testing::ReferenceModelFiles();
    repo.refs["main"] = main_;
    hub_.AddRepo(kRepo, repo);
  }
  void TearDown() override { RemoveTree(scratch_); }

  // relserve-model with `args`, HF_ENDPOINT at the test's Hub and HF_HUB_CACHE in the scratch
  // folder, and `env` ("NAME=value ...") besides; standard input from `input`.
  Result RunModelTool(const std::string& args, const std::string& env = "",
                      const std::string& input = "/dev/null") {
    const std::string err = scratch_ + "/stderr";
    const std::string cmd = absl::StrCat("env -u HF_TOKEN -u HF_HUB_OFFLINE HF_ENDPOINT=", hub_.endpoint(),
                                         " HF_HUB_CACHE=", cache_dir_, " HF_HOME=", scratch_, "/home ", env,
                                         " OMP_WAIT_POLICY=PASSIVE ", RELSERVE_MODEL_BINARY, " ", args,
                                         " < ", input, " 2> ", err);
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out.append(buf, n);
    const int status = pclose(p);
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out, ReadFileToString(err).value_or("")};
  }

  std::string SnapshotDir() const { return HubCache(cache_dir_).SnapshotDir(kRepo, main_); }

  FakeHub hub_;
  std::string scratch_;
  std::string cache_dir_;
  std::string main_;
};

TEST_F(HubEndToEndTest, RelserveModelLoadsAHubModel) {
  Result r = RunModelTool("info --model " + kRepo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const nlohmann::json info = nlohmann::json::parse(r.out);
  EXPECT_EQ(info["architecture"], "DebertaV2Model");
  EXPECT_EQ(info["hidden_size"], 32);
  EXPECT_EQ(info["has_tokenizer"], true);
  EXPECT_EQ(info["tokenizer_file"], "spm.model");
  EXPECT_THAT(r.err, HasSubstr("downloaded org/deberta-tiny: model.safetensors"));  // logged: stderr is no terminal
  EXPECT_TRUE(FileExists(SnapshotDir() + "/spm.model"));

  // The same model by its commit, the cache complete: no request at all.
  hub_.ClearRequests();
  r = RunModelTool("embed --model " + kRepo + "@" + main_, "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(hub_.requests().empty());
}

TEST_F(HubEndToEndTest, DownloadPrintsTheSnapshotAndOfflineNeedsNoHub) {
  Result r = RunModelTool("download --model " + kRepo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, SnapshotDir() + "\n");
  EXPECT_EQ(*ReadFileToString(HubCache(cache_dir_).RefPath(kRepo, "main")), main_);

  hub_.ClearRequests();
  r = RunModelTool("info --offline --model " + kRepo);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunModelTool("tokenize --model " + kRepo, "HF_HUB_OFFLINE=1");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunModelTool("download --offline --model " + kRepo);
  EXPECT_EQ(r.out, SnapshotDir() + "\n");
  EXPECT_TRUE(hub_.requests().empty());

  r = RunModelTool("info --model org/other", "HF_HUB_OFFLINE=1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("org/other is not in the cache " + cache_dir_), HasSubstr("offline (HF_HUB_OFFLINE)"),
                           HasSubstr("[NOT_FOUND]")));
}

TEST_F(HubEndToEndTest, DownloadErrorsSayWhatToDo) {
  Result r = RunModelTool("download --model org/missing");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, AllOf(HasSubstr("repository org/missing not found on " + hub_.endpoint()), HasSubstr("HF_TOKEN")));
  r = RunModelTool("download --model " + kRepo, "HF_HUB_OFFLINE=perhaps");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("HF_HUB_OFFLINE: \"perhaps\""));
  r = RunModelTool("download --model not-a-hub-id");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("no '/' between organisation and repository"));
}

// A fine-tune that ships only tokenizer.json (no spm.model): downloaded, its tokenizer read from
// that file, and the texts encoded and embedded exactly as the model with spm.model does.
TEST_F(HubEndToEndTest, ARepositoryWithOnlyTokenizerJsonServesText) {
  const std::string fast_repo = "org/deberta-tokenizer-json";
  FakeRepo repo;
  std::map<std::string, testing::FakeFile> files = testing::ReferenceModelFiles();
  files.erase("spm.model");
  files["tokenizer.json"] = {
      *ReadFileToString(std::string(RELSERVE_TEST_DATA_DIR) + "/tokenizer_json/deberta/tokenizer.json"), false};
  const std::string commit = testing::FakeCommitHash("fast");
  repo.commits[commit] = files;
  repo.refs["main"] = commit;
  hub_.AddRepo(fast_repo, repo);

  const std::string input = "scratch_input.txt";
  ASSERT_TRUE(WriteStringToFile(scratch_ + "/" + input,
                                "Hello world, [SEP] here\nA second line\tand its pair\n")
                  .ok());
  for (const char* command : {"tokenize", "embed"}) {
    Result fast = RunModelTool(absl::StrCat(command, " --model ", fast_repo), "", scratch_ + "/" + input);
    Result slow = RunModelTool(absl::StrCat(command, " --model ", kRepo), "", scratch_ + "/" + input);
    ASSERT_EQ(fast.exit_code, 0) << fast.err;
    ASSERT_EQ(slow.exit_code, 0) << slow.err;
    EXPECT_FALSE(fast.out.empty());
    EXPECT_EQ(fast.out, slow.out) << command;
  }
  Result info = RunModelTool("info --model " + fast_repo);
  ASSERT_EQ(info.exit_code, 0) << info.err;
  EXPECT_EQ(nlohmann::json::parse(info.out)["tokenizer_file"], "tokenizer.json");
  const std::string snapshot = HubCache(cache_dir_).SnapshotDir(fast_repo, commit);
  EXPECT_TRUE(FileExists(snapshot + "/tokenizer.json"));
  EXPECT_FALSE(FileExists(snapshot + "/spm.model"));
}

// relserve --model NAME=org/repo: fetched at start-up, served, named in the log.
TEST_F(HubEndToEndTest, TheServerServesAHubModel) {
  setenv("HF_ENDPOINT", hub_.endpoint().c_str(), 1);
  setenv("HF_HUB_CACHE", cache_dir_.c_str(), 1);
  unsetenv("HF_HUB_OFFLINE");
  unsetenv("HF_TOKEN");
  const std::vector<std::string> args = {"--model", "tiny=" + kRepo, "--grpc-address", "127.0.0.1:0",
                                         "--http-address", "-1", "--metrics-port", "-1", "--warmup", "false"};
  testing::ServerProcess p = testing::ServerProcess::Launch(RELSERVE_BINARY, args);
  testing::KillOnExit guard{p.pid};
  const int port = p.WaitForPort();
  ASSERT_GT(port, 0) << p.Log();
  auto stub = testing::Connect(port);
  v1::EmbedRequest request;
  request.set_model("tiny");
  request.add_inputs()->set_text("hello hub");
  v1::EmbedResponse response;
  grpc::ClientContext context;
  const grpc::Status status = stub->Embed(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.embeddings_size(), 1);
  EXPECT_EQ(response.embeddings(0).values_size(), 32);
  // The Hub id and the repository's name name it too (what clients of TEI and vLLM send).
  for (const std::string& alias : {std::string(kRepo), std::string("deberta-tiny")}) {
    request.set_model(alias);
    v1::EmbedResponse aliased;
    grpc::ClientContext alias_context;
    const grpc::Status s = stub->Embed(&alias_context, request, &aliased);
    ASSERT_TRUE(s.ok()) << alias << ": " << s.error_message();
    EXPECT_EQ(aliased.model(), "tiny") << alias;
  }
  kill(p.pid, SIGTERM);
  EXPECT_EQ(p.WaitExit(), 0);
  EXPECT_THAT(p.Log(), AllOf(HasSubstr("model tiny: org/deberta-tiny is " + SnapshotDir()),
                             HasSubstr("loaded DebertaV2Model from " + SnapshotDir()),
                             HasSubstr("tokenizer from spm.model")));

  // --offline with a model the cache lacks: exit 1 before anything listens, naming the model.
  testing::ServerProcess offline = testing::ServerProcess::Launch(
      RELSERVE_BINARY, {"--model", "other=org/other", "--offline", "--grpc-address", "127.0.0.1:0", "--http-address",
                        "-1", "--metrics-port", "-1"});
  testing::KillOnExit offline_guard{offline.pid};
  EXPECT_EQ(offline.WaitExit(), 1);
  EXPECT_THAT(offline.Log(), AllOf(HasSubstr("model other: org/other is not in the cache"), HasSubstr("offline (--offline)")));
  unsetenv("HF_ENDPOINT");
  unsetenv("HF_HUB_CACHE");
}

// SIGTERM during a download stops the start-up (exit 0, as for any start-up interrupted) and
// keeps what arrived for the next start.
TEST_F(HubEndToEndTest, ASignalStopsADownloadThatResumesLater) {
  hub_.SetCdnFault(testing::CdnFault::kStall);
  setenv("HF_ENDPOINT", hub_.endpoint().c_str(), 1);
  setenv("HF_HUB_CACHE", cache_dir_.c_str(), 1);
  setenv("HF_HUB_DOWNLOAD_TIMEOUT", "60", 1);
  unsetenv("HF_HUB_OFFLINE");
  unsetenv("HF_TOKEN");
  testing::ServerProcess p = testing::ServerProcess::Launch(
      RELSERVE_BINARY, {"--model", "tiny=" + kRepo, "--grpc-address", "127.0.0.1:0", "--http-address", "-1",
                        "--metrics-port", "-1", "--warmup", "false"});
  testing::KillOnExit guard{p.pid};
  ASSERT_TRUE(testing::WaitUntil([&] { return hub_.CountRequests("cdn", "/lfs/") > 0; }, std::chrono::seconds(60)))
      << p.Log();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the first half arrives
  kill(p.pid, SIGTERM);
  int code = -1;
  ASSERT_TRUE(p.ExitsWithin(20, &code)) << p.Log();
  EXPECT_EQ(code, 0) << p.Log();
  EXPECT_THAT(p.Log(), HasSubstr("start-up interrupted by a shutdown signal"));
  unsetenv("HF_HUB_DOWNLOAD_TIMEOUT");

  hub_.SetCdnFault(testing::CdnFault::kNone);
  hub_.ClearRequests();
  Result r = RunModelTool("download --model " + kRepo);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("resuming after"));
  unsetenv("HF_ENDPOINT");
  unsetenv("HF_HUB_CACHE");
}

}  // namespace
}  // namespace relserve
