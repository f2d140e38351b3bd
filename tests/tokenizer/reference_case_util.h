#ifndef RELSERVE_TESTS_TOKENIZER_REFERENCE_CASE_UTIL_H_
#define RELSERVE_TESTS_TOKENIZER_REFERENCE_CASE_UTIL_H_

// Runs one case of a transformers reference file (tests/data/reference/tokenizer_*/cases.json)
// through a Tokenizer: a "text", a "text_pair", or a padded batch of "texts" / "text_pairs",
// with the "call" arguments (padding, max_length) transformers was given.

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/tokenizer/tokenizer.h"

namespace relserve::testing {

using Row = std::vector<int32_t>;

struct Batch {
  std::vector<Row> input_ids, token_type_ids, attention_mask;
  // Per text (two per pair): the ids of the text's own tokens, as tokenize() lists them.
  std::vector<Row> text_tokens;
};

inline void AddRow(const Encoding& enc, Batch* batch) {
  batch->input_ids.push_back(enc.input_ids);
  batch->token_type_ids.push_back(enc.token_type_ids);
  batch->attention_mask.push_back(enc.attention_mask);
}

inline void AddTextTokens(const Encoding& enc, int sequences, Batch* batch) {
  for (int s = 0; s < sequences; ++s) {
    Row ids;
    for (size_t i = 0; i < enc.input_ids.size(); ++i) {
      if (enc.sequence_ids[i] == s) ids.push_back(enc.input_ids[i]);
    }
    batch->text_tokens.push_back(ids);
  }
}

// Encodes the case; a batch is padded as transformers pads with padding=True (to the longest
// row) or padding="max_length".
inline Batch RunCase(const Tokenizer& tokenizer, const nlohmann::json& c) {
  Batch batch;
  std::vector<Encoding> rows;
  const nlohmann::json& call = c["call"];
  TokenizeOptions opts;
  if (call.contains("max_length")) opts.max_length = call["max_length"].get<int>();
  auto add = [&](absl::StatusOr<Encoding> enc, int sequences) {
    EXPECT_TRUE(enc.ok()) << enc.status() << " in case " << c["id"];
    if (!enc.ok()) return;
    AddTextTokens(*enc, sequences, &batch);
    rows.push_back(*std::move(enc));
  };
  if (c.contains("text")) {
    add(tokenizer.Encode(c["text"].get<std::string>(), opts), 1);
  } else if (c.contains("text_pair")) {
    add(tokenizer.EncodePair(c["text_pair"][0].get<std::string>(),
                             c["text_pair"][1].get<std::string>(), opts),
        2);
  } else if (c.contains("texts")) {
    for (const auto& text : c["texts"]) add(tokenizer.Encode(text.get<std::string>(), opts), 1);
  } else {
    for (const auto& pair : c["text_pairs"]) {
      add(tokenizer.EncodePair(pair[0].get<std::string>(), pair[1].get<std::string>(), opts), 2);
    }
  }
  size_t pad_to = 0;
  if (call.contains("padding")) {
    if (call["padding"].is_string() && call["padding"] == "max_length") {
      pad_to = static_cast<size_t>(opts.max_length);
    } else {
      for (const Encoding& row : rows) pad_to = std::max(pad_to, row.input_ids.size());
    }
  }
  for (Encoding& row : rows) {
    EXPECT_TRUE(tokenizer.Pad(&row, static_cast<int>(pad_to)).ok());
    AddRow(row, &batch);
  }
  return batch;
}

// The expected rows of a field: a single row for a text or pair, else a list of rows.
inline std::vector<Row> ExpectedRows(const nlohmann::json& field) {
  if (!field.empty() && field[0].is_array()) return field.get<std::vector<Row>>();
  return {field.get<Row>()};
}

// Compares a case with its expected "input_ids", "attention_mask", "token_type_ids" (where
// transformers returns them) and the tokens of each text ("tokens", compared through
// IdToPiece except for the unknown token, whose text SentencePiece reports as the surface).
inline void ExpectCase(const Tokenizer& tokenizer, const nlohmann::json& c,
                       const nlohmann::json& expected, const nlohmann::json& tokens) {
  const Batch got = RunCase(tokenizer, c);
  const std::string id = c["id"].get<std::string>();
  EXPECT_EQ(got.input_ids, ExpectedRows(expected["input_ids"])) << id;
  EXPECT_EQ(got.attention_mask, ExpectedRows(expected["attention_mask"])) << id;
  if (expected.contains("token_type_ids")) {
    EXPECT_EQ(got.token_type_ids, ExpectedRows(expected["token_type_ids"])) << id;
  }
  ASSERT_EQ(got.text_tokens.size(), tokens.size()) << id;
  for (size_t t = 0; t < tokens.size(); ++t) {
    const auto want = tokens[t].get<std::vector<std::string>>();
    ASSERT_EQ(got.text_tokens[t].size(), want.size()) << id << " text " << t;
    for (size_t i = 0; i < want.size(); ++i) {
      const int32_t token = got.text_tokens[t][i];
      if (token == tokenizer.unk_id() && want[i] != tokenizer.IdToPiece(token)) continue;
      EXPECT_EQ(tokenizer.IdToPiece(token), want[i]) << id << " text " << t << " token " << i;
    }
  }
}

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_TOKENIZER_REFERENCE_CASE_UTIL_H_
