#include "server/model/families/model_tokenizer.h"

#include "server/model/families/family_descriptor.h"
#include "server/tokenizer/families/tokenizer_class.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::StatusOr<ModelTokenizer> LoadModelTokenizer(const std::string& dir, const ModelConfig& config,
                                                  const SentenceTransformersConfig& st, int max_length,
                                                  const SentencePieceModuleOptions& sentencepiece) {
  ModelTokenizer out;
  // The tokenizer family names the files that make a tokenizer; without them the model serves
  // token ids only. A file that is there but unreadable as a file (a directory) is an error, not
  // a model served without text input.
  absl::StatusOr<TokenizerFamily> family = ResolveTokenizerFamily(dir, config.family->tokenizer_family(config));
  if (absl::IsFailedPrecondition(family.status())) {
    // A tokenizer class relserve does not have: the model takes token ids.
    out.no_tokenizer_reason = std::string(family.status().message());
    return out;
  }
  RETURN_IF_ERROR(family.status());
  ASSIGN_OR_RETURN(const bool has_files, Tokenizer::HasFiles(dir, *family));
  if (!has_files) return out;
  ASSIGN_OR_RETURN(out.tokenizer, Tokenizer::Load(dir, *family, max_length, sentencepiece));
  // sentence-transformers' Transformer.tokenize lowers every text (str.lower) first.
  if (st.do_lower_case) out.tokenizer->LowerCaseWholeText();
  return out;
}

}  // namespace relserve
