#ifndef RELSERVE_SERVER_TOKENIZER_POST_PROCESSOR_TEMPLATE_H_
#define RELSERVE_SERVER_TOKENIZER_POST_PROCESSOR_TEMPLATE_H_

#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/files/tokenizer_json.h"
#include "server/tokenizer/special_tokens.h"

namespace relserve {

// One item of a template: a text ($A, $B) or a special token (one or more ids).
struct TemplatePiece {
  int sequence = -1;         // -1: special token; 0: the first text; 1: the second
  std::vector<int32_t> ids;  // a special token's ids
  int32_t type_id = 0;
  // A special token of one id left out where the text right before it already ends with that
  // id: T5Tokenizer._add_eos_if_not_present, so that "hello</s>" gets no second </s> from the
  // slow T5 and mT5 tokenizers. Still counted by NumSpecialTokens, as transformers'
  // num_special_tokens_to_add counts it when it truncates. The `tokenizers` library's
  // TemplateProcessing (tokenizer.json) has no such rule and adds it whatever the text ends with.
  bool unless_text_ends_with_it = false;
};

// Where the special tokens go around one text and around a pair (the `tokenizers` library's
// TemplateProcessing): single holds $A once, pair $A and $B once each.
struct PostProcessorTemplate {
  std::vector<TemplatePiece> single;
  std::vector<TemplatePiece> pair;

  int NumSpecialTokens(bool is_pair) const;
  // INVALID_ARGUMENT when single or pair lacks its texts or repeats one, or an id lies outside
  // [0, vocab_size).
  absl::Status Validate(int vocab_size) const;
};

// The template of the family's slow tokenizer (see tokenizer.h), from its special token ids;
// T5's </s> pieces are unless_text_ends_with_it, as T5Tokenizer's build_inputs_with_special_tokens.
// INVALID_ARGUMENT naming the role when a token the template needs has no id.
absl::StatusOr<PostProcessorTemplate> FamilyTemplate(const TokenizerFamilyDescriptor& family,
                                                     const SpecialTokenIds& ids);

// The template of tokenizer.json's post-processor ($A, then $A $B with type 1, when it has
// none). Families whose models read no token type ids (the descriptor's uses_token_types: T5,
// MPNet, RoBERTa, XLM-RoBERTa) get 0 throughout, as their slow tokenizers give, whatever type
// ids the file names.
PostProcessorTemplate TemplateFromJson(const TokenizerJson& json,
                                       const TokenizerFamilyDescriptor& family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_POST_PROCESSOR_TEMPLATE_H_
