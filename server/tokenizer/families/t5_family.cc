// T5 (T5Tokenizer): SentencePiece, a </s> (b </s>), no </s> after a text that ends with one.
#include <memory>
#include <utility>

#include "server/tokenizer/families/family_text_models.h"
#include "server/tokenizer/families/registered_tokenizer_families.h"  // generated: its declaration
#include "server/tokenizer/models/sentencepiece_text_model.h"
#include "server/tokenizer/models/t5_text_model.h"
#include "server/tokenizer/models/token_decoders.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::StatusOr<LoadedTextModel> LoadTextModel(const TokenizerFiles& files,
                                              const TokenizerJson* json,
                                              const TokenizerConfig& config,
                                              const SentencePieceModuleOptions& sentencepiece) {
  ASSIGN_OR_RETURN(std::unique_ptr<SentencePieceModel> spm,
                   LoadFamilySentencePiece(files, json, T5TokenizerFamily(), config, sentencepiece));
  LoadedTextModel loaded;
  loaded.reserved = spm->reserved_ids();
  if (WithoutLegacy(T5TokenizerFamily(), config)) {
    ASSIGN_OR_RETURN(loaded.model, T5TextModel::Create(std::move(spm), config.special_tokens.unk));
  } else {
    loaded.model = std::make_unique<SentencePieceTextModel>(std::move(spm), false);
  }
  return loaded;
}

// T5Tokenizer.tokenize with legacy=False.
class WithoutLegacyRules : public FamilyTextRules {
 public:
  WithoutLegacyRules(bool prefix_space, int space_piece_id)
      : prefix_space_(prefix_space), space_piece_id_(space_piece_id) {}

  // "▁" in the text reads as a space, and a "▁" goes before it (add_prefix_space).
  MappedText BeforeSplit(const MappedText& text) const override {
    MappedText out;
    if (prefix_space_) {
      const auto [origin, unused] = text.Span(0, 0);
      out.Append(U'\u2581', origin, origin);
    }
    text.ForEachChar([&](char32_t c, size_t b, size_t e) {
      if (c == U'\u2581') {
        const auto [begin, end] = text.Span(b, e);
        out.Append(U' ', begin, end);
      } else {
        out.AppendRange(text, b, e);
      }
    });
    return out;
  }

  // The "▁" put before a text that starts with a special token goes.
  void AfterSplit(bool first_from_model, bool second_is_special,
                  std::vector<TokenSpan>* tokens) const override {
    if (tokens->size() > 1 && first_from_model && space_piece_id_ >= 0 &&
        (*tokens)[0].id == space_piece_id_ && second_is_special) {
      tokens->erase(tokens->begin());
    }
  }

 private:
  const bool prefix_space_;
  const int space_piece_id_;  // the vocabulary's "▁", -1 when it has none
};

std::unique_ptr<FamilyTextRules> TextRules(const TokenizerConfig& config, const TextModel& model) {
  if (!WithoutLegacy(T5TokenizerFamily(), config)) return nullptr;
  return std::make_unique<WithoutLegacyRules>(config.add_prefix_space.value_or(true),
                                              model.PieceToId("\xe2\x96\x81"));
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
    d->text_rules = &TextRules;
    return d;
  }();
  return *family;
}

}  // namespace relserve
