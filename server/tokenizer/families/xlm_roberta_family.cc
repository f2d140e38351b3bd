// XLM-RoBERTa (XLMRobertaTokenizer): SentencePiece with fairseq's ids, <s> a </s> (</s> b </s>).
#include <memory>
#include <utility>

#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/sentencepiece_text_model.h"
#include "server/tokenizer/models/xlm_roberta_text_model.h"
#include "server/tokenizer/models/token_decoders.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& config,
                                              const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm,
                   LoadFamilySentencePiece(files, json, XlmRobertaTokenizerFamily(), config, sentencepiece));
  LoadedTextModel loaded;
  // tokenizer.json holds the vocabulary in fairseq's order already.
  if (json != nullptr) {
    loaded.model = std::make_unique<SentencePieceTextModel>(std::move(spm));
  } else {
    loaded.model = std::make_unique<XlmRobertaTextModel>(std::move(spm));
  }
  return loaded;
}

}  // namespace

const TokenizerFamilyDescriptor& XlmRobertaTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kXlmRoberta;
    d->name = "XLM-RoBERTa";
    d->tokenizer_classes = {"XLMRobertaTokenizer"};
    d->vocab_files = {"sentencepiece.bpe.model"};
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "<pad>", names.unk = "<unk>", names.cls = "<s>", names.sep = "</s>";
    names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
    d->has_do_lower_case = false;
    d->mask_strips_left = true;
    d->single_template = {{R::kCls}, {R::kFirstText}, {R::kSep}};
    d->pair_template = {{R::kCls}, {R::kFirstText}, {R::kSep}, {R::kSep}, {R::kSecondText}, {R::kSep}};
    d->sep_is_eos = true;
    d->json_model = TokenizerJson::ModelType::kUnigram;
    // XLMRobertaTokenizer lowers nothing.
    d->json_components = {"Strip", "Precompiled", "Replace", "Metaspace", "WhitespaceSplit"};
    d->load_text_model = &LoadTextModel;
    d->decode = &DecodeMetaspace;
    return d;
  }();
  return *family;
}

}  // namespace relserve
