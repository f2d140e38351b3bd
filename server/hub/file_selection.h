#ifndef RELSERVE_SERVER_HUB_FILE_SELECTION_H_
#define RELSERVE_SERVER_HUB_FILE_SELECTION_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// Reads a (small) file of the repository: an index of shards or modules.json. Online it is
// downloaded into the snapshot first; offline it comes from the snapshot.
using ReadRepoFile = std::function<absl::StatusOr<std::string>(const std::string& file)>;

// The files of a repository that relserve needs to serve it, out of `repo_files` (every file
// at one commit), in the order to fetch them: configuration and tokenizer files first, then
// the sentence-transformers modules' files, then the weights, so that a snapshot that holds its
// weights holds everything before them too.
//   - config.json (required);
//   - weights: model.safetensors, else model.safetensors.index.json and the shards its
//     weight_map names, else pytorch_model.bin, else pytorch_model.bin.index.json and its
//     shards (one of them required; every shard an index names must be in the repository);
//   - tokenizer files that are present: spm.model, spiece.model, tokenizer.json,
//     tokenizer_config.json, special_tokens_map.json, vocab.txt, vocab.json, merges.txt,
//     added_tokens.json, sentencepiece.bpe.model;
//   - sentence-transformers files that are present: modules.json, sentence_bert_config.json,
//     config_sentence_transformers.json, and in every module folder modules.json names its
//     config.json and weights as above (model.safetensors, else pytorch_model.bin); a Pooling
//     or Dense module's config.json and a Dense module's weights are required;
//   - heads beside the weights that are present: sparse_linear.pt and colbert_linear.pt
//     (BAAI/bge-m3's), after the modules' files and before the weights.
// `read` is called for the index and modules.json only. Errors: NOT_FOUND naming a required
// file that is missing; INVALID_ARGUMENT for an index or modules.json that cannot be read
// (naming the file and the key) or that names a path outside the repository.
absl::StatusOr<std::vector<std::string>> SelectModelFiles(const std::vector<std::string>& repo_files,
                                                          const ReadRepoFile& read);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HUB_FILE_SELECTION_H_
