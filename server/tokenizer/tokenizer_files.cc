#include "server/tokenizer/tokenizer_files.h"

#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// The names a family's vocabulary may have; for RoBERTa both are needed.
std::vector<std::string> CandidateNames(TokenizerFamily family) {
  switch (family) {
    case TokenizerFamily::kDeberta: return {"spm.model", "spiece.model"};
    case TokenizerFamily::kT5:
    case TokenizerFamily::kXlnet: return {"spiece.model", "spm.model"};
    case TokenizerFamily::kBert:
    case TokenizerFamily::kMpnet: return {"vocab.txt"};
    case TokenizerFamily::kRoberta: return {"vocab.json", "merges.txt"};
    case TokenizerFamily::kXlmRoberta: return {"sentencepiece.bpe.model"};
  }
  return {};
}

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
                                                  TokenizerFamily family) {
  const std::vector<std::string> names = CandidateNames(family);
  ASSIGN_OR_RETURN(const std::vector<bool> present, Present(model_dir, names));
  TokenizerFiles files;
  if (family == TokenizerFamily::kRoberta) {
    if (present[0] && present[1]) {
      files.vocab = JoinPath(model_dir, names[0]);
      files.merges = JoinPath(model_dir, names[1]);
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
  if (family == TokenizerFamily::kRoberta) {
    const std::string& missing = present[0] ? names[1] : names[0];
    return absl::NotFoundError(absl::StrCat(
        model_dir, ": no ", missing, " and no ", kTokenizerJsonFile, " (a ",
        TokenizerFamilyName(family), " tokenizer needs vocab.json and merges.txt, or ",
        kTokenizerJsonFile, ")"));
  }
  const bool sentencepiece = names.size() > 1;
  return absl::NotFoundError(absl::StrCat(
      model_dir, ": no ", sentencepiece ? "SentencePiece model" : "WordPiece vocabulary",
      " (looked for ", absl::StrJoin(names, ", "), " and ", kTokenizerJsonFile, ")"));
}

std::string TokenizerFilesDescription(TokenizerFamily family) {
  if (family == TokenizerFamily::kRoberta) {
    return absl::StrCat(absl::StrJoin(CandidateNames(family), " and "), ", or ",
                        kTokenizerJsonFile);
  }
  return absl::StrCat(absl::StrJoin(CandidateNames(family), " or "), " or ", kTokenizerJsonFile);
}

absl::StatusOr<bool> HasTokenizerFiles(const std::string& model_dir, TokenizerFamily family) {
  std::vector<std::string> names = CandidateNames(family);
  names.push_back(kTokenizerJsonFile);
  ASSIGN_OR_RETURN(const std::vector<bool> present, Present(model_dir, names));
  for (const bool here : present) {
    if (here) return true;
  }
  return false;
}

}  // namespace relserve
