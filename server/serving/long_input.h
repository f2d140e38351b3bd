#ifndef RELSERVE_SERVER_SERVING_LONG_INPUT_H_
#define RELSERVE_SERVER_SERVING_LONG_INPUT_H_

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/inference_backend.h"
#include "server/serving/input_encoder.h"
#include "server/serving/serving_types.h"

namespace relserve {

class Tokenizer;

// Texts longer than a model's maximum, embedded whole (EmbedRequest.whole_input): the text's
// tokens are split into windows that each fit the model with the template's special tokens,
// each window is one sequence through the batcher, and the windows' pooled vectors are averaged.

// A text's windows. One window, the text as EncodeInput would encode it, when it fits.
// Otherwise each window is the template's special tokens around a run of the text's tokens:
// the first `keep_leading` text tokens (a sentence-transformers prompt) start every window, the
// rest are dealt out in runs of the room that is left, each run repeating the last `overlap`
// tokens of the one before. INVALID_ARGUMENT naming `field` when the window has no room for a
// token beyond the prompt, or naming window_overlap when `overlap` is negative or more than
// half that room (short texts included). A text that needs more than `max_windows` windows is
// refused (kTooMany, naming --max-windows-per-request and how many it needs) after reading
// only the tokens that many windows hold. `keep_going` is asked while the text is tokenized
// (Tokenizer's TokenizeOptions::keep_going).
absl::StatusOr<std::vector<EncodedInput>> EncodeTextWindows(const std::string& text, const std::string& field,
                                                            const Tokenizer& tokenizer,
                                                            const InferenceBackend& backend, int max_length,
                                                            int overlap, int keep_leading_bytes,
                                                            int max_windows = 1 << 20,
                                                            std::function<absl::Status()> keep_going = nullptr);

// Windows a text of `text_tokens` tokens takes, each holding `room` of them after the first
// `keep` (the prompt's), the next repeating `overlap` of the one before.
int64_t WindowCount(int64_t text_tokens, int keep, int room, int overlap);

// Chunked rerank: a (query, document) pair that does not fit the model, scored in windows. One
// window, the pair as EncodePair would encode it, when it fits. Otherwise each window is the
// template's special tokens and the whole query around a run of the document's tokens, the
// runs of the room the query leaves, each repeating the last `overlap` tokens of the one before;
// at most `max_windows` windows (the rest of the document is not scored, as Cohere's
// max_chunks_per_doc drops it). INVALID_ARGUMENT naming `field` when the query leaves no room
// for a document token, or when `overlap` is negative or more than half that room.
absl::StatusOr<std::vector<EncodedInput>> EncodePairWindows(const std::string& query, const std::string& document,
                                                            const std::string& field, const Tokenizer& tokenizer,
                                                            const InferenceBackend& backend, int max_length,
                                                            int overlap, int max_windows);

// The first `max_tokens` of a document's own tokens (Cohere v2's max_tokens_per_doc): the text
// up to the end of its last kept token, or the whole text when it has no more tokens than that.
absl::StatusOr<std::string> FirstTokensOf(const std::string& document, const std::string& field,
                                          const Tokenizer& tokenizer, int max_tokens);

// The windows' pooled vectors (before the model's normalisation) combined: their mean weighted
// by `weights` (the tokens each window's pooling saw). Requires as many vectors as weights, all
// of one length, and a positive total weight.
std::vector<float> CombineWindows(const std::vector<const std::vector<float>*>& pooled,
                                  const std::vector<double>& weights);

// Sparse vectors of several windows as one: the largest weight of each id (SPLADE max-pools over
// every token, bge-m3 keeps each id's largest weight). Inputs and output ids ascending.
std::vector<std::pair<int32_t, float>> MergeSparseMax(const std::vector<const std::vector<std::pair<int32_t, float>>*>& parts);

// v / |v| (sentence-transformers' Normalize), left as it is when |v| < 1e-12.
void L2Normalize(std::vector<float>* v);

// A request's inputs as the sequences they run as: input i is sequences [first[i], first[i + 1]),
// one, or, for a text embedded whole, one per window (EncodeTextWindows).
struct InputWindows {
  std::vector<EncodedInput> sequences;
  std::vector<size_t> first;  // one more entry than inputs; first.back() == sequences.size()

  size_t inputs() const { return first.empty() ? 0 : first.size() - 1; }
  // Whether some input took more than one window (its merge then needs the pooled vectors
  // before the model's Normalize: kOutputPooledUnnormalized).
  bool windowed() const;
};

// Input `input`'s embedding from its sequences' outputs (`outputs` is indexed as
// windows.sequences; what the input's own are moved out): with one window, its pooled vector;
// with several, the windows' pooled vectors before the model's Normalize weighted by the tokens
// each one pooled (CombineWindows), normalised again where the model normalises
// (`model_normalizes`). Where `output_flags` asks for them, the windows' sparse vectors as one
// (MergeSparseMax) and their multi-vectors one after another (`multi_vector_dim` wide). Tokens
// are every window's; truncated where any window was. Matryoshka dimensions and the request's
// normalisation are the caller's.
Embedding MergeWindows(const InputWindows& windows, size_t input, uint32_t output_flags, bool model_normalizes,
                       int multi_vector_dim, std::vector<SequenceOutput>* outputs);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_LONG_INPUT_H_
