// RoBERTa (RobertaTokenizer): byte-level BPE, <s> a </s> (</s> b </s>).
#include <memory>
#include <utility>

#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/files/tokenizer_json_model.h"
#include "server/tokenizer/models/byte_level_bpe_text_model.h"
#include "server/tokenizer/models/token_decoders.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& /*config*/,
                                              const SentencePieceModuleOptions& /*sentencepiece*/) {
  ByteLevelBpeVocab vocab;
  if (json == nullptr) {
    ASSIGN_OR_RETURN(vocab, ByteLevelBpeVocab::Load(files.vocab, files.merges));
  } else {
    ASSIGN_OR_RETURN(vocab, ByteLevelBpeVocabFromJson(*json, files.tokenizer_json));
  }
  LoadedTextModel loaded;
  loaded.model = std::make_unique<ByteLevelBpeTextModel>(std::move(vocab));
  return loaded;
}

}  // namespace

const TokenizerFamilyDescriptor& RobertaTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kRoberta;
    d->name = "RoBERTa";
    d->tokenizer_classes = {"RobertaTokenizer"};
    d->vocab_files = {"vocab.json", "merges.txt"};
    d->needs_every_vocab_file = true;
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "<pad>", names.unk = "<unk>", names.cls = "<s>", names.sep = "</s>";
    names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
    d->has_add_prefix_space = true;
    d->mask_strips_left = true;
    d->single_template = {{R::kCls}, {R::kFirstText}, {R::kSep}};
    d->pair_template = {{R::kCls}, {R::kFirstText}, {R::kSep}, {R::kSep}, {R::kSecondText}, {R::kSep}};
    d->sep_is_eos = true;
    d->json_model = TokenizerJson::ModelType::kBpe;
    d->json_components = {"ByteLevel"};
    d->load_text_model = &LoadTextModel;
    d->decode = &DecodeByteLevel;
    return d;
  }();
  return *family;
}

}  // namespace relserve
