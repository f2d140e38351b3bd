// BERT, ELECTRA, DistilBERT (BertTokenizer): WordPiece, [CLS] a [SEP] (b [SEP]).
#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/token_decoders.h"

namespace relserve {

const TokenizerFamilyDescriptor& BertTokenizerFamily() {
  static const TokenizerFamilyDescriptor* const family = [] {
    using R = TemplateRole;
    auto* d = new TokenizerFamilyDescriptor;
    d->family = TokenizerFamily::kBert;
    d->name = "BERT";
    d->tokenizer_classes = {"BertTokenizer", "ElectraTokenizer", "DistilBertTokenizer"};
    d->vocab_files = {"vocab.txt"};
    SpecialTokenNames& names = d->special_tokens;
    names.pad = "[PAD]", names.unk = "[UNK]", names.cls = "[CLS]", names.sep = "[SEP]";
    names.mask = "[MASK]";
    d->do_lower_case = true;
    d->lowers_in_basic_tokenizer = true;
    d->single_template = {{R::kCls}, {R::kFirstText}, {R::kSep}};
    d->pair_template = {{R::kCls}, {R::kFirstText}, {R::kSep}, {R::kSecondText, 1}, {R::kSep, 1}};
    d->uses_token_types = true;
    d->json_model = TokenizerJson::ModelType::kWordPiece;
    d->json_components = {"BertNormalizer", "BertPreTokenizer"};
    d->load_text_model = &LoadWordPieceFamilyModel;
    d->decode = &DecodeWordPiece;
    return d;
  }();
  return *family;
}

}  // namespace relserve
