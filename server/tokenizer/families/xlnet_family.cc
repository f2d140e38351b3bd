// XLNet (XLNetTokenizer): SentencePiece, a <sep> (b <sep>) <cls>, padded on the left.
#include <memory>
#include <utility>

#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/xlnet_text_model.h"
#include "server/tokenizer/models/token_decoders.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& config,
                                              const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm,
                   LoadFamilySentencePiece(files, json, XlnetTokenizerFamily(), config, sentencepiece));
  LoadedTextModel loaded;
  loaded.reserved = spm->reserved_ids();
  XlnetTextOptions options;
  options.do_lower_case = config.do_lower_case;
  options.remove_space = config.remove_space;
  options.keep_accents = config.keep_accents;
  loaded.model = std::make_unique<XlnetTextModel>(std::move(spm), options);
  return loaded;
}

}  // namespace

const TokenizerFamilyDescriptor& XlnetTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kXlnet;
    d->name = "XLNet";
    d->tokenizer_classes = {"XLNetTokenizer"};
    d->vocab_files = {"spiece.model", "spm.model"};
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "<pad>", names.unk = "<unk>", names.cls = "<cls>", names.sep = "<sep>";
    names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
    names.additional = {"<eop>", "<eod>"};
    d->has_keep_accents = true;
    d->replaces_quotes = true;
    d->lowers_digit_comma_scores = true;
    d->mask_strips_left = true;
    // XLNetTokenizer's segment ids: A and its <sep> 0, B and its <sep> 1, <cls> 2.
    d->single_template = {{R::kFirstText}, {R::kSep}, {R::kCls, 2}};
    d->pair_template = {{R::kFirstText}, {R::kSep}, {R::kSecondText, 1}, {R::kSep, 1},
                        {R::kCls, 2}};
    d->uses_token_types = true;
    d->pads_left = true;
    d->pad_token_type_id = 3;
    d->json_model = TokenizerJson::ModelType::kUnigram;
    d->json_components = {"Strip",     "Precompiled", "Replace", "Metaspace", "WhitespaceSplit",
                          "Lowercase", "NFKD",        "StripAccents"};
    d->load_text_model = &LoadTextModel;
    d->decode = &DecodeMetaspace;
    return d;
  }();
  return *family;
}

}  // namespace relserve
