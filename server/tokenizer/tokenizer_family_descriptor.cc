#include "server/tokenizer/tokenizer_family_descriptor.h"

#include <cstdlib>

#include "server/tokenizer/families/tokenizer_families.h"

namespace relserve {

const TokenizerFamilyDescriptor& Describe(TokenizerFamily family) {
  switch (family) {
    case TokenizerFamily::kDeberta: return DebertaTokenizerFamily();
    case TokenizerFamily::kT5: return T5TokenizerFamily();
    case TokenizerFamily::kBert: return BertTokenizerFamily();
    case TokenizerFamily::kRoberta: return RobertaTokenizerFamily();
    case TokenizerFamily::kMpnet: return MpnetTokenizerFamily();
    case TokenizerFamily::kXlnet: return XlnetTokenizerFamily();
    case TokenizerFamily::kXlmRoberta: return XlmRobertaTokenizerFamily();
  }
  std::abort();  // not an enumerator
}

const std::vector<TokenizerFamily>& AllTokenizerFamilies() {
  static const auto* const families = new std::vector<TokenizerFamily>{
      TokenizerFamily::kDeberta, TokenizerFamily::kT5,    TokenizerFamily::kBert,
      TokenizerFamily::kRoberta, TokenizerFamily::kMpnet, TokenizerFamily::kXlnet,
      TokenizerFamily::kXlmRoberta,
  };
  return *families;
}

const char* TokenizerFamilyName(TokenizerFamily family) { return Describe(family).name; }

}  // namespace relserve
