#ifndef RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKENS_H_
#define RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/special_token_names.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/sentencepiece/sentencepiece_c_api.h"

namespace relserve {

// The names transformers' tokenizer class of the family uses by default (DebertaV2Tokenizer,
// T5Tokenizer without its <extra_id_N> tokens, BertTokenizer, MPNetTokenizer, XLNetTokenizer,
// RobertaTokenizer): the special_tokens of its descriptor.
SpecialTokenNames DefaultSpecialTokenNames(const TokenizerFamilyDescriptor& family);

// The ids of the special roles; -1 where the family has no such role.
struct SpecialTokenIds {
  int32_t pad = -1;
  int32_t unk = -1;
  int32_t cls = -1;
  int32_t sep = -1;
  int32_t eos = -1;
  int32_t mask = -1;
};

// For the SentencePiece roles of DeBERTa and T5 (pad, unk, cls, sep, eos), picks each role's
// id, in this order:
//   1. the named piece, when the vocabulary holds exactly that piece;
//   2. the id the SentencePiece model reserved for the role when it was trained (unk, pad;
//      bos for [CLS]; eos for [SEP] and </s>), when it has one: the model's own declaration
//      says more about it than a family-wide convention;
//   3. the family default (its descriptor's sentencepiece_roles): DeBERTa pad 0, cls 1, sep 2,
//      unk 3; T5 pad 0, eos 1, unk 2.
// INVALID_ARGUMENT when the chosen id lies outside the vocabulary. piece_to_id answers -1 for
// a piece the vocabulary lacks; it is a function so these rules can be tested without a model.
absl::StatusOr<SpecialTokenIds> ResolveSpecialTokenIds(
    const TokenizerFamilyDescriptor& family, const SpecialTokenNames& names,
    const std::function<int(std::string_view)>& piece_to_id, const RelserveSpmReservedIds& reserved,
    int vocab_size);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_SPECIAL_TOKENS_H_
