#include "server/tokenizer/files/tokenizer_files.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// Which of the names are files; an error for a directory under one of them.
absl::StatusOr<std::vector<bool>> Present(const std::string& model_dir,
                                          const std::vector<std::string>& names) {
  std::vector<bool> present;
  for (const std::string& name : names) {
    ASSIGN_OR_RETURN(const bool here, OptionalFileExists(JoinPath(model_dir, name)));
    present.push_back(here);
  }
  return present;
}

}  // namespace

absl::StatusOr<TokenizerFiles> FindTokenizerFiles(const std::string& model_dir,
                                                  const TokenizerFamilyDescriptor& descriptor) {
  const std::vector<std::string>& names = descriptor.vocab_files;
  ASSIGN_OR_RETURN(const std::vector<bool> present, Present(model_dir, names));
  TokenizerFiles files;
  if (descriptor.needs_every_vocab_file) {
    if (std::find(present.begin(), present.end(), false) == present.end()) {
      files.vocab = JoinPath(model_dir, names[0]);
      if (names.size() > 1) files.merges = JoinPath(model_dir, names[1]);
      return files;
    }
  } else {
    for (size_t i = 0; i < names.size(); ++i) {
      if (present[i]) {
        files.vocab = JoinPath(model_dir, names[i]);
        return files;
      }
    }
  }
  const std::string json_path = JoinPath(model_dir, kTokenizerJsonFile);
  ASSIGN_OR_RETURN(const bool has_json, OptionalFileExists(json_path));
  if (has_json) {
    files.tokenizer_json = json_path;
    return files;
  }
  if (descriptor.needs_every_vocab_file) {
    const size_t missing = static_cast<size_t>(
        std::find(present.begin(), present.end(), false) - present.begin());
    return absl::NotFoundError(absl::StrCat(
        model_dir, ": no ", names[missing], " and no ", kTokenizerJsonFile, " (a ",
        descriptor.name, " tokenizer needs ", TokenizerFilesDescription(descriptor), ")"));
  }
  const bool sentencepiece = names.size() > 1;
  return absl::NotFoundError(absl::StrCat(
      model_dir, ": no ", sentencepiece ? "SentencePiece model" : "WordPiece vocabulary",
      " (looked for ", absl::StrJoin(names, ", "), " and ", kTokenizerJsonFile, ")"));
}

std::string TokenizerFilesDescription(const TokenizerFamilyDescriptor& descriptor) {
  if (descriptor.needs_every_vocab_file) {
    return absl::StrCat(absl::StrJoin(descriptor.vocab_files, " and "), ", or ",
                        kTokenizerJsonFile);
  }
  return absl::StrCat(absl::StrJoin(descriptor.vocab_files, " or "), " or ", kTokenizerJsonFile);
}

absl::StatusOr<bool> HasTokenizerFiles(const std::string& model_dir,
                                       const TokenizerFamilyDescriptor& family) {
  std::vector<std::string> names = family.vocab_files;
  names.push_back(kTokenizerJsonFile);
  ASSIGN_OR_RETURN(const std::vector<bool> present, Present(model_dir, names));
  for (const bool here : present) {
    if (here) return true;
  }
  return false;
}

}  // namespace relserve
