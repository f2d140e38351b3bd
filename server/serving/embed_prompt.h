#ifndef RELSERVE_SERVER_SERVING_EMBED_PROMPT_H_
#define RELSERVE_SERVER_SERVING_EMBED_PROMPT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/backend/inference_backend.h"
#include "server/serving/serving_types.h"

namespace relserve {

class Tokenizer;

// An Embed request's inputs with the model's sentence-transformers prompt put before each
// text, as SentenceTransformer.encode(texts, prompt_name=...) does it.
struct PromptedInputs {
  bool prompted = false;      // false: no prompt applies, `inputs` is empty (use the request's)
  std::vector<Input> inputs;  // the request's, each non-empty text with the prompt before it
  // The prompt's tokens as sentence-transformers counts them (the prompt alone tokenized, less
  // one), for models whose Pooling leaves the prompt out (include_prompt false); else 0.
  int32_t pooling_skip = 0;
};

// The prompt named `prompt_name`, else the model's default prompt, else none. INVALID_ARGUMENT
// for a name the model does not have (`prompt_name "x" is not one of the model's prompts:
// document, query`, or `...: the model has no prompts`), and for an explicit prompt_name with an
// input that is not a text (`inputs[1]: prompt_name puts the prompt before texts; this input is
// token ids`). Token-id and pair inputs are left as they are under a default prompt. Empty texts
// stay empty (and are refused as ever). `max_length` cuts the prompt alone when it is counted.
absl::StatusOr<PromptedInputs> ApplyEmbedPrompt(const std::vector<Input>& inputs, const std::string& prompt_name,
                                                const ModelInfo& info, const Tokenizer* tokenizer, int max_length);

}  // namespace relserve

#endif  // RELSERVE_SERVER_SERVING_EMBED_PROMPT_H_
