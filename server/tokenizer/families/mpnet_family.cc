// MPNet (MPNetTokenizer): WordPiece, <s> a </s> (</s> b </s>).
#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/token_decoders.h"

namespace relserve {

const TokenizerFamilyDescriptor& MpnetTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kMpnet;
    d->name = "MPNet";
    d->tokenizer_classes = {"MPNetTokenizer"};
    d->vocab_files = {"vocab.txt"};
    // MPNetTokenizer keeps BERT's unknown token.
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "<pad>", names.unk = "[UNK]", names.cls = "<s>", names.sep = "</s>";
    names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
    d->do_lower_case = true;
    d->lowers_in_basic_tokenizer = true;
    d->mask_strips_left = true;
    d->single_template = {{R::kCls}, {R::kFirstText}, {R::kSep}};
    d->pair_template = {{R::kCls}, {R::kFirstText}, {R::kSep}, {R::kSep}, {R::kSecondText}, {R::kSep}};
    d->sep_is_eos = true;
    d->json_model = TokenizerJson::ModelType::kWordPiece;
    d->json_components = {"BertNormalizer", "BertPreTokenizer"};
    d->load_text_model = &LoadWordPieceFamilyModel;
    d->decode = &DecodeWordPiece;
    return d;
  }();
  return *family;
}

}  // namespace relserve
