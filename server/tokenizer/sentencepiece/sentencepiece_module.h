#ifndef RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODULE_H_
#define RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODULE_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/sentencepiece/sentencepiece_c_api.h"

namespace relserve {

inline constexpr char kSentencePieceModuleFile[] = "librelserve_sentencepiece.so";
// The programs' flag that names the module file, and the variable the flag tables read it from
// (server/util/flag_table.h): the names errors give for an explicit module.
inline constexpr char kSentencePieceModuleFlag[] = "--sentencepiece-module";
inline constexpr char kSentencePieceModuleEnv[] = "RELSERVE_SENTENCEPIECE_MODULE";

// Where SentencePieceModule::Find looks, handed down from the programs' flags (relserve's and
// relserve-model's --sentencepiece-module) to every load of a SentencePiece model.
struct SentencePieceModuleOptions {
  // The module file to open, the only place tried; empty: the first file of SearchPath() that
  // exists.
  std::string path;
};

// librelserve_sentencepiece.so, opened with RTLD_LOCAL | RTLD_DEEPBIND so that the protobuf
// runtime inside Debian's libsentencepiece never meets the process's libprotobuf (see
// sentencepiece_c_api.h). It is never unmapped (RTLD_NODELETE): unloading a library that
// carries its own protobuf runtime buys nothing and risks its shutdown hooks.
class SentencePieceModule {
 public:
  // Opens options.path when it is non-empty (FAILED_PRECONDITION naming it, the flag and its
  // variable when it is missing or cannot be opened: a module elsewhere is never used instead);
  // otherwise the first file of SearchPath() that exists. FAILED_PRECONDITION, naming every
  // place tried, when there is none or it cannot be opened.
  static absl::StatusOr<std::shared_ptr<const SentencePieceModule>> Find(
      const SentencePieceModuleOptions& options = {});
  // Opens the module at exactly this path.
  static absl::StatusOr<std::shared_ptr<const SentencePieceModule>> Open(const std::string& path);
  // Where Find() looks when its options name no module, in order:
  //   <dir of the executable>/../lib/librelserve_sentencepiece.so   (build tree: bin/ and lib/)
  //   <dir of the executable>/../lib/relserve/librelserve_sentencepiece.so   (installed)
  //   <dir of the executable>/librelserve_sentencepiece.so
  //   the module in the build tree this library was compiled in.
  static std::vector<std::string> SearchPath();
  // The dlopen flags Open() uses: RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE, plus RTLD_DEEPBIND
  // unless the module was built against a SentencePiece that shares the process's libprotobuf
  // (RELSERVE_SENTENCEPIECE_PREFIX, the sanitizer builds: sanitizers refuse RTLD_DEEPBIND).
  static int LoadFlags();

  SentencePieceModule(const SentencePieceModule&) = delete;
  SentencePieceModule& operator=(const SentencePieceModule&) = delete;
  ~SentencePieceModule();

  const RelserveSpmApi& api() const { return *api_; }
  const std::string& path() const { return path_; }

 private:
  SentencePieceModule(void* handle, const RelserveSpmApi* api, std::string path)
      : handle_(handle), api_(api), path_(std::move(path)) {}

  void* handle_;
  const RelserveSpmApi* api_;
  std::string path_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_SENTENCEPIECE_SENTENCEPIECE_MODULE_H_
