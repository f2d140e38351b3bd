// DeBERTa-v2/v3 (DebertaV2Tokenizer): SentencePiece, [CLS] a [SEP] (b [SEP]).
#include <memory>
#include <utility>

#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/sentencepiece_text_model.h"
#include "server/tokenizer/models/token_decoders.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& config,
                                              const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm,
                   LoadFamilySentencePiece(files, json, DebertaTokenizerFamily(), config, sentencepiece));
  LoadedTextModel loaded;
  loaded.reserved = spm->reserved_ids();
  // split_by_punct: DebertaV2Tokenizer's switch.
  loaded.model = std::make_unique<SentencePieceTextModel>(std::move(spm), config.split_by_punct);
  return loaded;
}

}  // namespace

const TokenizerFamilyDescriptor& DebertaTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kDeberta;
    d->name = "DeBERTa";
    d->tokenizer_classes = {"DebertaV2Tokenizer"};
    d->vocab_files = {"spm.model", "spiece.model"};
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "[PAD]", names.unk = "[UNK]", names.cls = "[CLS]", names.sep = "[SEP]";
    names.mask = "[MASK]", names.bos = "[CLS]", names.eos = "[SEP]";
    d->sentencepiece_roles = SentencePieceRoleDefaults{/*pad=*/0, /*cls=*/1, /*sep=*/2,
                                                       /*eos=*/-1, /*unk=*/3};
    d->single_template = {{R::kCls}, {R::kFirstText}, {R::kSep}};
    d->pair_template = {{R::kCls}, {R::kFirstText}, {R::kSep}, {R::kSecondText, 1}, {R::kSep, 1}};
    d->uses_token_types = true;
    d->json_model = TokenizerJson::ModelType::kUnigram;
    d->json_components = {"Strip",     "Precompiled",     "Replace",  "Metaspace",
                          "WhitespaceSplit", "Lowercase", "Punctuation"};
    d->load_text_model = &LoadTextModel;
    d->decode = &DecodeMetaspace;
    return d;
  }();
  return *family;
}

}  // namespace relserve
