#ifndef RELSERVE_SERVER_TOKENIZER_FAMILIES_FAMILY_TEXT_MODELS_H_
#define RELSERVE_SERVER_TOKENIZER_FAMILIES_FAMILY_TEXT_MODELS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/files/tokenizer_config.h"
#include "server/tokenizer/files/tokenizer_files.h"
#include "server/tokenizer/files/tokenizer_json.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model.h"

namespace relserve {

// What the families' text model factories share.

// Whether config turns off the legacy behaviour of a family that has the switch
// (T5Tokenizer with legacy=False).
bool WithoutLegacy(const TokenizerFamilyDescriptor& family, const TokenizerConfig& config);

// The SentencePiece model of spm.model / spiece.model (without its dummy prefix for a family
// WithoutLegacy, as T5Tokenizer.get_spm_processor), or the one tokenizer.json describes.
absl::StatusOr<std::unique_ptr<SentencePieceModel>> LoadFamilySentencePiece(
    const TokenizerFiles& files, const TokenizerJson* json, const TokenizerFamilyDescriptor& family,
    const TokenizerConfig& config, const SentencePieceModuleOptions& sentencepiece);

// BertTokenizer's and MPNetTokenizer's WordPiece model, from vocab.txt or tokenizer.json.
absl::StatusOr<LoadedTextModel> LoadWordPieceFamilyModel(const TokenizerFiles& files,
                                                         const TokenizerJson* json,
                                                         const TokenizerConfig& config,
                                                         const SentencePieceModuleOptions& sentencepiece);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_FAMILIES_FAMILY_TEXT_MODELS_H_
