// T5 (T5Tokenizer): SentencePiece, a </s> (b </s>), no </s> after a text that ends with one.
#include <memory>
#include <utility>

#include "server/tokenizer/families/tokenizer_families.h"
#include "server/tokenizer/models/sentencepiece_text_model.h"
#include "server/tokenizer/models/t5_text_model.h"
#include "server/tokenizer/token_decoder.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& config) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm,
                   LoadFamilySentencePiece(files, json, TokenizerFamily::kT5, config));
  LoadedTextModel loaded;
  loaded.reserved = spm->reserved_ids();
  if (WithoutLegacy(T5TokenizerFamily(), config)) {
    ASSIGN_OR_RETURN(loaded.model, T5TextModel::Create(std::move(spm), config.special_tokens.unk));
  } else {
    loaded.model = std::make_unique<SentencePieceTextModel>(std::move(spm), false);
  }
  return loaded;
}

}  // namespace

const TokenizerFamilyDescriptor& T5TokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kT5;
    d->name = "T5";
    d->tokenizer_classes = {"T5Tokenizer"};
    d->vocab_files = {"spiece.model", "spm.model"};
    // Without its <extra_id_N> tokens (has_extra_ids).
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "<pad>", names.unk = "<unk>", names.eos = "</s>";
    d->has_do_lower_case = false;
    d->has_legacy = true;
    d->sentencepiece_roles = SentencePieceRoleDefaults{/*pad=*/0, /*cls=*/-1, /*sep=*/-1,
                                                       /*eos=*/1, /*unk=*/2};
    d->has_extra_ids = true;
    // build_inputs_with_special_tokens runs _add_eos_if_not_present on each text.
    d->single_template = {{R::kFirstText}, {R::kEos, 0, true}};
    d->pair_template = {{R::kFirstText}, {R::kEos, 0, true}, {R::kSecondText}, {R::kEos, 0, true}};
    d->json_model = TokenizerJson::ModelType::kUnigram;
    // T5Tokenizer lowers nothing.
    d->json_components = {"Strip", "Precompiled", "Replace", "Metaspace", "WhitespaceSplit"};
    d->load_text_model = &LoadTextModel;
    d->decode = &DecodeMetaspace;
    return d;
  }();
  return *family;
}

}  // namespace relserve
