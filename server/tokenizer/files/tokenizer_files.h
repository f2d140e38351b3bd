#ifndef RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_FILES_H_
#define RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_FILES_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"

namespace relserve {

// Where a family's vocabulary lives in a Hugging Face model directory (its descriptor's
// vocab_files):
//   DeBERTa, T5, XLNet  spm.model or spiece.model (SentencePiece; the family's usual name first)
//   BERT, MPNet         vocab.txt (WordPiece)
//   RoBERTa             vocab.json and merges.txt (byte-level BPE)
//   XLM-RoBERTa         sentencepiece.bpe.model (SentencePiece, fairseq's ids)
// and, where those are missing, tokenizer.json (the fast tokenizer's file), which holds the
// same vocabulary.
struct TokenizerFiles {
  std::string vocab;           // full path; empty when only tokenizer.json is there
  std::string merges;          // full path; RoBERTa only
  std::string tokenizer_json;  // full path, set when the vocabulary comes from tokenizer.json
};

inline constexpr char kTokenizerJsonFile[] = "tokenizer.json";

// NOT_FOUND naming the files looked for when the directory has none of them (or, for RoBERTa,
// lacks one of the two and has no tokenizer.json). A directory or dangling link in a file's
// place is INVALID_ARGUMENT.
absl::StatusOr<TokenizerFiles> FindTokenizerFiles(const std::string& model_dir,
                                                  const TokenizerFamilyDescriptor& family);

// The files a family's tokenizer reads, for messages: "spm.model or spiece.model or
// tokenizer.json", "vocab.txt or tokenizer.json", "vocab.json and merges.txt, or
// tokenizer.json".
std::string TokenizerFilesDescription(const TokenizerFamilyDescriptor& family);

// Whether the directory holds any of the family's vocabulary files, so that a model is served
// with text input; the same errors for a directory in a file's place.
absl::StatusOr<bool> HasTokenizerFiles(const std::string& model_dir,
                                       const TokenizerFamilyDescriptor& family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FILES_TOKENIZER_FILES_H_
