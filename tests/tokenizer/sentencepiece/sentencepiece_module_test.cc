// The SentencePiece module: where it is found, what an explicit path (the programs'
// --sentencepiece-module, or RELSERVE_SENTENCEPIECE_MODULE through their flag tables) overrides,
// and that it works in a process that has the system libprotobuf loaded, which is what it exists
// for.

#include "server/tokenizer/sentencepiece/sentencepiece_module.h"

#include <dlfcn.h>
#include <link.h>

#include <string>

#include <google/protobuf/stubs/common.h>

#include "gtest/gtest.h"
#include "server/tokenizer/tokenizer.h"
#include "tests/tokenizer/tokenizer_test_util.h"

namespace relserve {
namespace {

using ::relserve::testing::MakeTempDir;
using ::relserve::testing::ReferenceModelPath;

bool ProcessHasLoaded(const std::string& library) {
  struct Search {
    const std::string* library;
    bool found;
  } search{&library, false};
  dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) {
        auto* s = static_cast<Search*>(data);
        if (info->dlpi_name != nullptr && std::string(info->dlpi_name).find(*s->library) !=
                                              std::string::npos) {
          s->found = true;
        }
        return 0;
      },
      &search);
  return search.found;
}

TEST(SentencePieceModuleTest, WorksNextToTheSystemProtobuf) {
  // Without the module's RTLD_LOCAL | RTLD_DEEPBIND, libsentencepiece's private protobuf 3.14
  // would meet this libprotobuf and abort in SentencePieceProcessor::Load.
  GOOGLE_PROTOBUF_VERIFY_VERSION;
  ASSERT_TRUE(ProcessHasLoaded("libprotobuf.so")) << "the test must run with libprotobuf loaded";
  auto tokenizer = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto enc = (*tokenizer)->Encode("Hello world");
  ASSERT_TRUE(enc.ok()) << enc.status();
  EXPECT_EQ(enc->input_ids, (std::vector<int32_t>{1, 5, 998, 11, 28, 339, 713, 2}));
  // And SentencePiece stayed out of the process's global symbol scope.
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "_ZN13sentencepiece22SentencePieceProcessorC1Ev"), nullptr);
}

TEST(SentencePieceModuleTest, SearchPathFollowsTheExecutable) {
  const std::vector<std::string> paths = SentencePieceModule::SearchPath();
  const std::string exe_dir = ExecutableDir();
  ASSERT_FALSE(exe_dir.empty());
  ASSERT_EQ(paths.size(), 4u);
  EXPECT_EQ(paths[0], exe_dir + "/../lib/librelserve_sentencepiece.so");
  EXPECT_EQ(paths[1], exe_dir + "/../lib/relserve/librelserve_sentencepiece.so");
  EXPECT_EQ(paths[2], exe_dir + "/librelserve_sentencepiece.so");
  EXPECT_EQ(paths[3], RELSERVE_TEST_MODULE_PATH);  // the build tree's module
}

TEST(SentencePieceModuleTest, FindsTheBuildTreeModule) {
  auto module = SentencePieceModule::Find(SentencePieceModuleOptions{""});  // empty: the search path
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->api().abi_version, RELSERVE_SPM_ABI_VERSION);
}

TEST(SentencePieceModuleTest, AnExplicitModuleIsUsed) {
  auto module = SentencePieceModule::Find(SentencePieceModuleOptions{RELSERVE_TEST_MODULE_PATH});
  ASSERT_TRUE(module.ok()) << module.status();
  EXPECT_EQ((*module)->path(), RELSERVE_TEST_MODULE_PATH);
}

TEST(SentencePieceModuleTest, AnExplicitModuleThatIsMissingIsAClearError) {
  const std::string missing =
      JoinPath(MakeTempDir("module_missing"), "librelserve_sentencepiece.so");
  // A module in the usual places must not be used instead of the one asked for: the tokenizer
  // hands its option down to the SentencePiece model it loads.
  auto tokenizer = Tokenizer::LoadModelFile(ReferenceModelPath(), TokenizerFamily::kDeberta, 512,
                                            SentencePieceModuleOptions{missing});
  EXPECT_EQ(tokenizer.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(tokenizer.status().message().find(kSentencePieceModuleEnv), std::string_view::npos)
      << tokenizer.status();
  EXPECT_NE(tokenizer.status().message().find(kSentencePieceModuleFlag), std::string_view::npos)
      << tokenizer.status();
  EXPECT_NE(tokenizer.status().message().find(missing), std::string_view::npos)
      << tokenizer.status();
}

TEST(SentencePieceModuleTest, AnExplicitModuleThatIsNoLibraryIsAClearError) {
  auto module = SentencePieceModule::Find(SentencePieceModuleOptions{ReferenceModelPath()});
  EXPECT_EQ(module.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(module.status().message().find("cannot load"), std::string_view::npos)
      << module.status();
}

TEST(SentencePieceModuleTest, EntryPointRefusesOtherAbiVersions) {
  void* handle = dlopen(RELSERVE_TEST_MODULE_PATH, SentencePieceModule::LoadFlags());
  ASSERT_NE(handle, nullptr) << dlerror();
  auto entry = reinterpret_cast<RelserveSpmEntryPoint>(dlsym(handle, RELSERVE_SPM_ENTRY_POINT));
  ASSERT_NE(entry, nullptr);
  EXPECT_EQ(entry(RELSERVE_SPM_ABI_VERSION + 1), nullptr);
  ASSERT_NE(entry(RELSERVE_SPM_ABI_VERSION), nullptr);
  EXPECT_EQ(entry(RELSERVE_SPM_ABI_VERSION)->abi_version, RELSERVE_SPM_ABI_VERSION);
  dlclose(handle);
}

}  // namespace
}  // namespace relserve
