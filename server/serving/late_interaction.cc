#include "server/serving/late_interaction.h"

#include <algorithm>
#include <limits>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"

namespace relserve {

absl::StatusOr<LateInteractionSide> LateInteractionSideOf(const std::string& name, const std::string& field) {
  if (name.empty() || name == "query" || name == "search_query") return LateInteractionSide::kQuery;
  if (name == "document" || name == "passage" || name == "search_document") return LateInteractionSide::kDocument;
  return FieldError(FieldErrorKind::kInvalid, field, absl::StrCat(
      field, " \"", name, "\" names no side of a ColBERT model: query (or search_query) or document (or passage, "
      "search_document)"));
}

absl::StatusOr<EncodedInput> EncodeLateInteraction(const std::string& text, LateInteractionSide side,
                                                   const std::string& field, const Tokenizer& tokenizer,
                                                   const InferenceBackend& backend, const LateInteractionInfo& info) {
  const std::string& what = field;
  const bool query = side == LateInteractionSide::kQuery;
  // sentence-transformers' Transformer.tokenize strips each text; Stanford's tokenizers do not
  // (BERT's basic tokenizer drops that white space anyway).
  const std::string stripped =
      info.layout == "pylate" ? std::string(absl::StripAsciiWhitespace(text)) : text;
  if (stripped.empty()) return FieldError(FieldErrorKind::kEmpty, what, absl::StrCat(what, " is empty"));
  const int32_t marker = query ? info.query_marker_id : info.document_marker_id;
  const int length = (query ? info.query_length : info.document_length) - (marker >= 0 ? 1 : 0);
  TokenizeOptions options;
  options.max_length = length;
  options.truncate = true;
  absl::StatusOr<Encoding> enc = tokenizer.Encode(stripped, options);
  if (!enc.ok()) return PrefixFieldError(what, enc.status());
  EncodedInput out;
  out.sequence.input_ids = std::move(enc->input_ids);
  out.sequence.token_type_ids = std::move(enc->token_type_ids);
  out.offsets = std::move(enc->offsets);
  for (int8_t s : enc->sequence_ids) out.special.push_back(s < 0);
  out.truncated = enc->truncated;
  int32_t attended = static_cast<int32_t>(out.sequence.input_ids.size());
  if (query && info.do_query_expansion) {
    const size_t n = static_cast<size_t>(length);
    out.sequence.input_ids.resize(std::max(n, out.sequence.input_ids.size()), info.expansion_id);
    out.sequence.token_type_ids.resize(out.sequence.input_ids.size(), tokenizer.pad_token_type_id());
    out.offsets.resize(out.sequence.input_ids.size(), {0, 0});
    out.special.resize(out.sequence.input_ids.size(), true);
  }
  if (marker >= 0) {
    // After the first token, as PyLate's insert_prefix_token and Stanford's ids[:, 1] = marker.
    const size_t at = std::min<size_t>(1, out.sequence.input_ids.size());
    out.sequence.input_ids.insert(out.sequence.input_ids.begin() + at, marker);
    out.sequence.token_type_ids.insert(out.sequence.token_type_ids.begin() + at, 0);
    out.offsets.insert(out.offsets.begin() + at, {0, 0});
    out.special.insert(out.special.begin() + at, true);
    ++attended;
  }
  if (query && info.do_query_expansion && !info.attend_to_expansion_tokens &&
      attended < static_cast<int32_t>(out.sequence.input_ids.size())) {
    out.sequence.attended_length = attended;
  }
  if (absl::Status s = backend.Validate(out.sequence); !s.ok()) return PrefixFieldError(what, s);
  return out;
}

std::vector<int32_t> ScoredPositions(const SequenceInput& sequence, LateInteractionSide side,
                                     const LateInteractionInfo& info) {
  std::vector<int32_t> positions;
  const int32_t n = static_cast<int32_t>(sequence.input_ids.size());
  if (side == LateInteractionSide::kQuery) {
    const int32_t kept = info.do_query_expansion || sequence.attended_length <= 0 ? n : sequence.attended_length;
    for (int32_t t = 0; t < kept; ++t) positions.push_back(t);
    return positions;
  }
  const std::vector<int32_t>& skip = info.skiplist_ids;
  for (int32_t t = 0; t < n; ++t) {
    if (std::find(skip.begin(), skip.end(), sequence.input_ids[t]) == skip.end()) positions.push_back(t);
  }
  return positions;
}

std::vector<float> KeptVectors(const std::vector<float>& vectors, int dim, const std::vector<int32_t>& positions) {
  std::vector<float> out;
  out.reserve(positions.size() * static_cast<size_t>(dim));
  for (int32_t t : positions) {
    const auto row = vectors.begin() + static_cast<std::ptrdiff_t>(t) * dim;
    out.insert(out.end(), row, row + dim);
  }
  return out;
}

double MaxSim(const std::vector<float>& query, const std::vector<float>& document, int dim) {
  if (dim <= 0 || document.empty()) return 0;
  const size_t q = query.size() / dim, d = document.size() / dim;
  double total = 0;
  for (size_t i = 0; i < q; ++i) {
    double best = -std::numeric_limits<double>::infinity();
    const float* a = query.data() + i * dim;
    for (size_t j = 0; j < d; ++j) {
      const float* b = document.data() + j * dim;
      double dot = 0;
      for (int k = 0; k < dim; ++k) dot += static_cast<double>(a[k]) * b[k];
      best = std::max(best, dot);
    }
    total += best;
  }
  return total;
}

}  // namespace relserve
