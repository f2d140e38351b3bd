#ifndef RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_CLASS_H_
#define RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_CLASS_H_

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/tokenizer_family.h"

namespace relserve {

// The tokenizer family a transformers tokenizer class name stands for, with or without "Fast":
//   DebertaV2Tokenizer, T5Tokenizer, BertTokenizer / ElectraTokenizer / DistilBertTokenizer,
//   MPNetTokenizer, XLNetTokenizer, RobertaTokenizer, XLMRobertaTokenizer.
// Unset for a class relserve has no tokenizer for.
std::optional<TokenizerFamily> TokenizerFamilyOfClass(const std::string& tokenizer_class);

// The family that tokenizes a model directory, as AutoTokenizer picks its class: the
// tokenizer_class of tokenizer_config.json where it names one (a BERT model may come with
// XLM-RoBERTa's tokenizer), else `model_family`, the model type's. PreTrainedTokenizerFast
// (a tokenizer that is only its tokenizer.json) keeps `model_family`. FAILED_PRECONDITION
// naming the class for one relserve has no tokenizer for (the model can still take token ids);
// INVALID_ARGUMENT for a tokenizer_config.json that cannot be read.
absl::StatusOr<TokenizerFamily> ResolveTokenizerFamily(const std::string& model_dir,
                                                       TokenizerFamily model_family);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FAMILIES_TOKENIZER_CLASS_H_
