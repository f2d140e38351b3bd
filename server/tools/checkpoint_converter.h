#ifndef RELSERVE_SERVER_TOOLS_CHECKPOINT_CONVERTER_H_
#define RELSERVE_SERVER_TOOLS_CHECKPOINT_CONVERTER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// What ConvertModelDirectory did; paths relative to the directories.
struct ConversionReport {
  std::vector<std::string> written;  // model.safetensors files, one per directory with weights
  std::vector<std::string> copied;   // configs, tokenizer and sentence-transformers files
  std::vector<std::string> skipped;  // the source's weight files, and files of other kinds
  int64_t tensors = 0;
  uint64_t bytes = 0;  // tensor bytes written
};

// Writes the safetensors equivalent of the model directory `model_dir` into `out_dir`
// (relserve-model convert): in the directory and in each subdirectory (sentence-transformers
// modules such as 2_Dense/) that holds weights in any format OpenModelCheckpoint reads, one
// model.safetensors with every tensor, as stored (dtype, shape, values; views made contiguous),
// with transformers' {"format": "pt"} metadata; beside them copies of the configuration,
// tokenizer and sentence-transformers files (names ending in .json, .txt, .model or .md, the
// weight indexes excepted). Other files (the source weights, other frameworks' weights, training
// state), hidden files and links to directories are skipped. config.json is written last, so a
// directory without it is an unfinished conversion. The tensors of one directory are held in
// memory while its file is written.
// NOT_FOUND when `model_dir` is missing or holds no weights; FAILED_PRECONDITION when `out_dir`
// exists and is not an empty directory, unless `overwrite` (files of the same name are then
// replaced); INVALID_ARGUMENT when `out_dir` is `model_dir` or inside it; any error of reading
// the checkpoints (a refused pickle, a corrupt file) or of writing.
absl::StatusOr<ConversionReport> ConvertModelDirectory(const std::string& model_dir, const std::string& out_dir,
                                                       bool overwrite);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_CHECKPOINT_CONVERTER_H_
