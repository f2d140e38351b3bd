#include "server/tokenizer/sentencepiece/sentencepiece_module.h"

#include <dlfcn.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

std::string LastDlError() {
  const char* message = dlerror();
  return message != nullptr ? message : "unknown dlopen error";
}

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RELSERVE_SANITIZER_REFUSES_DEEPBIND 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RELSERVE_SANITIZER_REFUSES_DEEPBIND 1
#endif

}  // namespace

int SentencePieceModule::LoadFlags() {
#ifdef RELSERVE_SENTENCEPIECE_SHARES_PROTOBUF
  return RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE;
#else
  return RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND | RTLD_NODELETE;
#endif
}

std::vector<std::string> SentencePieceModule::SearchPath() {
  std::vector<std::string> paths;
  const std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) {
    paths.push_back(JoinPath(exe_dir, JoinPath("../lib", kSentencePieceModuleFile)));
    paths.push_back(JoinPath(exe_dir, JoinPath("../lib/relserve", kSentencePieceModuleFile)));
    paths.push_back(JoinPath(exe_dir, kSentencePieceModuleFile));
  }
#ifdef RELSERVE_SENTENCEPIECE_MODULE_DEFAULT
  // Lets tools and tests run from anywhere inside the build tree without setting anything.
  paths.push_back(RELSERVE_SENTENCEPIECE_MODULE_DEFAULT);
#endif
  return paths;
}

absl::StatusOr<std::shared_ptr<const SentencePieceModule>> SentencePieceModule::Find(
    const SentencePieceModuleOptions& options) {
  if (!options.path.empty()) {
    // An explicit choice is never silently replaced by a module found elsewhere.
    if (!FileExists(options.path)) {
      return absl::FailedPreconditionError(
          absl::StrCat(kSentencePieceModuleFlag, " (", kSentencePieceModuleEnv, ") ", options.path,
                       ": no such file (the SentencePiece module)"));
    }
    auto module = Open(options.path);
    if (!module.ok()) {
      return absl::FailedPreconditionError(absl::StrCat("from ", kSentencePieceModuleFlag, " (",
                                                        kSentencePieceModuleEnv, "): ", module.status().message()));
    }
    return module;
  }
  const std::vector<std::string> paths = SearchPath();
  for (const std::string& path : paths) {
    // The first file that exists decides: a broken install should fail, not be skipped.
    if (FileExists(path)) return Open(path);
  }
  return absl::FailedPreconditionError(absl::StrCat(
      "SentencePiece module ", kSentencePieceModuleFile, " not found; looked in: ",
      absl::StrJoin(paths, ", "), ". Give its full path with ", kSentencePieceModuleFlag, " (or ",
      kSentencePieceModuleEnv, ")."));
}

absl::StatusOr<std::shared_ptr<const SentencePieceModule>> SentencePieceModule::Open(
    const std::string& path) {
#if defined(RELSERVE_SANITIZER_REFUSES_DEEPBIND) && !defined(RELSERVE_SENTENCEPIECE_SHARES_PROTOBUF)
  // The sanitizer runtime would kill the process on an RTLD_DEEPBIND dlopen.
  return absl::FailedPreconditionError(absl::StrCat(
      "cannot load SentencePiece module ", path,
      ": this is a sanitizer build, and sanitizers refuse the RTLD_DEEPBIND load that Debian's "
      "libsentencepiece needs; configure with RELSERVE_SENTENCEPIECE_PREFIX (see "
      "scripts/sanitize.sh)"));
#endif
  void* handle = dlopen(path.c_str(), LoadFlags());
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load SentencePiece module ", path, ": ", LastDlError()));
  }
  auto entry = reinterpret_cast<RelserveSpmEntryPoint>(dlsym(handle, RELSERVE_SPM_ENTRY_POINT));
  if (entry == nullptr) {
    const std::string error = LastDlError();
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        path, " is not a relserve SentencePiece module (", RELSERVE_SPM_ENTRY_POINT,
        " missing: ", error, ")"));
  }
  const RelserveSpmApi* api = entry(RELSERVE_SPM_ABI_VERSION);
  if (api == nullptr || api->abi_version != RELSERVE_SPM_ABI_VERSION) {
    dlclose(handle);
    return absl::FailedPreconditionError(absl::StrCat(
        "SentencePiece module ", path, " does not speak ABI version ", RELSERVE_SPM_ABI_VERSION,
        "; it comes from a different relserve build"));
  }
  return std::shared_ptr<const SentencePieceModule>(new SentencePieceModule(handle, api, path));
}

SentencePieceModule::~SentencePieceModule() { dlclose(handle_); }

}  // namespace relserve
