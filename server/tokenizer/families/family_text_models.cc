// The parts of the families' text model factories that more than one family uses.
#include <string>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/files/tokenizer_json_model.h"
#include "server/tokenizer/models/wordpiece_text_model.h"
#include "server/tokenizer/sentencepiece/sentencepiece_model_proto.h"
#include "server/util/file_util.h"
#include "server/util/status_macros.h"

namespace relserve {

bool WithoutLegacy(const TokenizerFamilyDescriptor& family, const TokenizerConfig& config) {
  return family.has_legacy && !config.legacy;
}

absl::StatusOr<std::unique_ptr<SentencePieceModel>> LoadFamilySentencePiece(
    const TokenizerFiles& files, const TokenizerJson* json, const TokenizerFamilyDescriptor& family,
    const TokenizerConfig& config, const SentencePieceModuleOptions& sentencepiece) {
  if (json == nullptr && WithoutLegacy(family, config)) {
    // T5Tokenizer.get_spm_processor: the model without its dummy prefix.
    if (!FileExists(files.vocab)) {
      return absl::NotFoundError(absl::StrCat(files.vocab, ": no such SentencePiece model file"));
    }
    ASSIGN_OR_RETURN(std::string bytes, ReadFileToString(files.vocab));
    return SentencePieceModel::LoadSerialized(bytes + NoDummyPrefixOverride(), files.vocab, sentencepiece);
  }
  if (json == nullptr) return SentencePieceModel::Load(files.vocab, sentencepiece);
  ASSIGN_OR_RETURN(const SentencePieceModelSpec spec, SentencePieceSpecFromJson(*json, family));
  return SentencePieceModel::LoadSerialized(SerializeSentencePieceModel(spec), files.tokenizer_json,
                                            sentencepiece);
}

absl::StatusOr<LoadedTextModel> LoadWordPieceFamilyModel(const TokenizerFiles& files,
                                                         const TokenizerJson* json,
                                                         const TokenizerConfig& config,
                                                         const SentencePieceModuleOptions& /*sentencepiece*/) {
  WordPieceVocab vocab;
  if (json == nullptr) {
    ASSIGN_OR_RETURN(vocab, WordPieceVocab::Load(files.vocab));
  } else {
    ASSIGN_OR_RETURN(vocab, WordPieceVocabFromJson(*json, files.tokenizer_json));
  }
  WordPieceOptions options;
  options.do_basic_tokenize = config.do_basic_tokenize;
  options.do_lower_case = config.do_lower_case;
  options.strip_accents = config.strip_accents;
  options.tokenize_chinese_chars = config.tokenize_chinese_chars;
  options.never_split.insert(config.never_split.begin(), config.never_split.end());
  const SpecialTokenNames& names = config.special_tokens;
  for (const std::string* name : {&names.pad, &names.unk, &names.cls, &names.sep, &names.eos,
                                  &names.mask, &names.bos}) {
    if (!name->empty()) options.special_tokens.insert(*name);
  }
  options.special_tokens.insert(names.additional.begin(), names.additional.end());
  options.max_input_chars_per_word = config.max_input_chars_per_word;
  LoadedTextModel loaded;
  loaded.model = std::make_unique<WordPieceTextModel>(std::move(vocab), std::move(options));
  return loaded;
}

}  // namespace relserve
