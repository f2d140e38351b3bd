#ifndef RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKEN_TABLE_H_
#define RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKEN_TABLE_H_

#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/added_tokens.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_c_api.h"
#include "server/tokenizer/special_tokens.h"

namespace relserve {

// The special tokens of a tokenizer: the ids of its roles and every token that text is split
// on before the vocabulary model sees it.
struct SpecialTokenTable {
  SpecialTokenIds ids;
  // The special tokens (bos, eos, unk, sep, pad, cls, mask, the additional ones), then the
  // other tokens of added_tokens_decoder / added_tokens.json.
  std::vector<AddedToken> added;
  int32_t vocab_size = 0;  // the model's vocabulary and every added id beyond it
};

// Gives each token its id as transformers' slow tokenizers do: the id added_tokens_decoder (or
// added_tokens.json) gives it, else its id in the vocabulary, else the next id after the
// vocabulary and the added tokens, in the order bos, eos, unk, sep, pad, cls, mask,
// additional. DeBERTa's and T5's SentencePiece roles instead follow ResolveSpecialTokenIds
// (which needs the model's `reserved` ids), and T5's <extra_id_N> come at vocab_size - 1 +
// extra_ids - N. Each token matches with the flags its file gives it, else as its
// tokenizer class makes it match: the mask token of MPNet, XLNet and RoBERTa eats the white
// space before it; T5's <extra_id_N> the white space on both sides.
absl::StatusOr<SpecialTokenTable> BuildSpecialTokenTable(const TokenizerFamilyDescriptor& family,
                                                         const TokenizerConfig& config,
                                                         const TextModel& model,
                                                         const RelserveSpmReservedIds& reserved);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKEN_TABLE_H_
