#include "server/tokenizer/families/tokenizer_families.h"

#include <cstdlib>

namespace relserve {

const std::vector<const TokenizerFamilyDescriptor*>& AllTokenizerFamilyDescriptors() {
  static const auto* const families = new std::vector<const TokenizerFamilyDescriptor*>{
      &DebertaTokenizerFamily(), &T5TokenizerFamily(),    &BertTokenizerFamily(),
      &RobertaTokenizerFamily(), &MpnetTokenizerFamily(), &XlnetTokenizerFamily(),
      &XlmRobertaTokenizerFamily(),
  };
  return *families;
}

const TokenizerFamilyDescriptor& Describe(TokenizerFamily family) {
  for (const TokenizerFamilyDescriptor* descriptor : AllTokenizerFamilyDescriptors()) {
    if (descriptor->family == family) return *descriptor;
  }
  std::abort();  // an enumerator without a descriptor in the list above
}

const char* TokenizerFamilyName(TokenizerFamily family) { return Describe(family).name; }

}  // namespace relserve
