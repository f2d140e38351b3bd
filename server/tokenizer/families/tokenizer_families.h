#ifndef RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_FAMILIES_H_
#define RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_FAMILIES_H_

#include <vector>

#include "server/tokenizer/descriptor/tokenizer_family.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"

namespace relserve {

// The registry of tokenizer families. Only the tokenizer's factory (Tokenizer::Load and its
// kin, tokenizer.h) and the tokenizer class lookup (tokenizer_class.h) look a descriptor up;
// everything else is handed the descriptor (or the Tokenizer that holds it).

// The family's descriptor.
const TokenizerFamilyDescriptor& Describe(TokenizerFamily family);

// Every family's descriptor: one per file <name>_family.cc here (CMakeLists.txt lists them), in
// the order of the files' names.
const std::vector<const TokenizerFamilyDescriptor*>& AllTokenizerFamilyDescriptors();

// The family's name for messages ("DeBERTa", "XLM-RoBERTa"): its descriptor's name. A C string:
// Debian's Abseil cannot StrCat a std::string_view.
const char* TokenizerFamilyName(TokenizerFamily family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_FAMILIES_H_
