#include "server/serving/embed_prompt.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "server/model_config/sentence_transformers_config.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"

namespace relserve {

absl::StatusOr<PromptedInputs> ApplyEmbedPrompt(const std::vector<Input>& inputs, const std::string& prompt_name,
                                                const ModelInfo& info, const Tokenizer* tokenizer, int max_length) {
  PromptedInputs out;
  absl::StatusOr<const std::string*> prompt = FindSentencePrompt(info.prompts, info.default_prompt_name, prompt_name);
  if (!prompt.ok()) return prompt.status();
  if (*prompt == nullptr) return out;
  if (!prompt_name.empty()) {
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (inputs[i].kind == Input::Kind::kText) continue;
      return FieldError(FieldErrorKind::kInvalid, absl::StrCat("inputs[", i, "]"),
                        absl::StrCat("inputs[", i, "]: prompt_name puts the prompt before texts; this input is ",
                                     inputs[i].kind == Input::Kind::kTokens ? "token ids" : "not a text"));
    }
  }
  out.prompted = true;
  out.inputs = inputs;
  for (Input& input : out.inputs) {
    if (input.kind == Input::Kind::kText && !input.text.empty()) input.text.insert(0, **prompt);
  }
  if (!info.pooling_includes_prompt && tokenizer != nullptr) {
    // SentenceTransformer.encode: prompt_length = len(tokenize([prompt])["input_ids"][0]) - 1.
    TokenizeOptions options;
    options.max_length = max_length;
    options.truncate = true;
    absl::StatusOr<Encoding> encoded = tokenizer->Encode(**prompt, options);
    if (encoded.ok()) out.pooling_skip = std::max<int32_t>(static_cast<int32_t>(encoded->input_ids.size()) - 1, 0);
  }
  return out;
}

}  // namespace relserve
