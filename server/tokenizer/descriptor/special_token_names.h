#ifndef RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_SPECIAL_TOKEN_NAMES_H_
#define RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_SPECIAL_TOKEN_NAMES_H_

#include <string>
#include <vector>

namespace relserve {

// The tokens that play each special role; "" where the family has no such role.
struct SpecialTokenNames {
  std::string pad;
  std::string unk;
  std::string cls;  // not T5
  std::string sep;  // not T5
  std::string eos;  // not BERT (whose end of sequence is its sep); DeBERTa: its sep token
  std::string mask;
  std::string bos;
  std::vector<std::string> additional;  // additional_special_tokens
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_SPECIAL_TOKEN_NAMES_H_
