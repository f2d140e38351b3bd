#ifndef RELSERVE_SERVER_SERVING_LATE_INTERACTION_H_
#define RELSERVE_SERVER_SERVING_LATE_INTERACTION_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/inference_backend.h"
#include "server/serving/input_encoder.h"

namespace relserve {

class Tokenizer;

// ColBERT late interaction (ModelInfo::late_interaction): queries and documents tokenized by the
// checkpoint's rules, their token vectors kept as those rules say, and MaxSim, as PyLate
// (pylate/models/colbert.py: tokenize, encode; pylate/scores/colbert.py: colbert_scores) and
// Stanford ColBERT (colbert/modeling/tokenization/, colbert/modeling/colbert.py) compute them.

enum class LateInteractionSide { kQuery, kDocument };

// The side a request names, as PyLate's is_query and the prompt or input_type names say it:
// "query" and "search_query" a query; "document", "passage", "search_document" a document; ""
// a query (PyLate's encode defaults to is_query=True). INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<LateInteractionSide> LateInteractionSideOf(const std::string& name, const std::string& field);

// One text as the model reads that side: (PyLate) the text stripped of surrounding white space,
// as sentence-transformers' Transformer.tokenize does; tokenized with the template and cut to
// the side's length less the marker; a query with expansion padded with the expansion token
// ([MASK]) to that length; the marker put after the first token ([CLS]). A query's expansion
// tokens are not attended to unless attend_to_expansion_tokens (SequenceInput::attended_length).
// INVALID_ARGUMENT naming `field` for an empty text or one the tokenizer refuses.
absl::StatusOr<EncodedInput> EncodeLateInteraction(const std::string& text, LateInteractionSide side,
                                                   const std::string& field, const Tokenizer& tokenizer,
                                                   const InferenceBackend& backend, const LateInteractionInfo& info);

// The positions of a sequence whose vectors are scored: every position of a query with
// expansion (the expansion tokens too), the attended ones of one without; a document's tokens
// whose id is not in the skiplist.
std::vector<int32_t> ScoredPositions(const SequenceInput& sequence, LateInteractionSide side,
                                     const LateInteractionInfo& info);

// Those positions' rows of `vectors` (one row of `dim` per token), in order.
std::vector<float> KeptVectors(const std::vector<float>& vectors, int dim, const std::vector<int32_t>& positions);

// MaxSim: the sum over the query's vectors of the largest dot product with a document vector
// (pylate.scores.colbert_scores; Stanford's colbert_score), summed in double. 0 for a document
// without vectors.
double MaxSim(const std::vector<float>& query, const std::vector<float>& document, int dim);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_LATE_INTERACTION_H_
