#ifndef RELSERVE_CLIENT_INPUT_PARSING_H_
#define RELSERVE_CLIENT_INPUT_PARSING_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "relserve/v1/encoder.pb.h"

namespace relserve::client {

// Token ids written "1,334,2", "1 334 2" or "[1, 334, 2]".
absl::StatusOr<std::vector<int32_t>> ParseTokenIds(const std::string& text);

// Inputs from command-line arguments: one text each, TEXT TEXT_PAIR two at a time (`pairs`),
// or one token id list each (`ids`).
absl::StatusOr<std::vector<v1::Input>> InputsFromArgs(const std::vector<std::string>& args, bool pairs, bool ids);

// One JSON line of standard input as an input:
//   {"text": "..."}                          a text (a bare JSON string is one too)
//   {"text": "...", "text_pair": "..."}      a text pair
//   {"tokens": [1, 334, 2], "token_type_ids": [0, 0, 0]}   token ids (types optional)
absl::StatusOr<v1::Input> ParseInputLine(const std::string& line);

// One JSON line of standard input for rerank: {"query": "...", "documents": ["...", ...]}.
struct RerankInput {
  std::string query;
  std::vector<std::string> documents;
};
absl::StatusOr<RerankInput> ParseRerankLine(const std::string& line);

// True for a line with nothing but whitespace (skipped on standard input).
bool IsBlankLine(const std::string& line);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_INPUT_PARSING_H_
