#include "server/tokenizer/post_processor_template.h"

#include <tuple>

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

TemplatePiece Special(int32_t id, int32_t type_id) { return TemplatePiece{-1, {id}, type_id}; }
TemplatePiece Text(int sequence, int32_t type_id) { return TemplatePiece{sequence, {}, type_id}; }

absl::Status ValidateSide(const std::vector<TemplatePiece>& side, bool is_pair, int vocab_size) {
  const char* name = is_pair ? "pair" : "single";
  int texts[2] = {0, 0};
  for (const TemplatePiece& piece : side) {
    if (piece.sequence == 0 || piece.sequence == 1) {
      ++texts[piece.sequence];
      continue;
    }
    if (piece.ids.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("the ", name, " template has a special token without ids"));
    }
    for (const int32_t id : piece.ids) {
      if (id < 0 || id >= vocab_size) {
        return absl::InvalidArgumentError(absl::StrCat("the ", name, " template's special id ",
                                                       id, " is outside the vocabulary of ",
                                                       vocab_size));
      }
    }
  }
  if (texts[0] != 1 || texts[1] != (is_pair ? 1 : 0)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the ", name, " template must hold ", is_pair ? "$A and $B once each" : "$A once and no $B",
        "; it holds $A ", texts[0], " times and $B ", texts[1], " times"));
  }
  return absl::OkStatus();
}

}  // namespace

int PostProcessorTemplate::NumSpecialTokens(bool is_pair) const {
  int n = 0;
  for (const TemplatePiece& piece : is_pair ? pair : single) {
    if (piece.sequence < 0) n += static_cast<int>(piece.ids.size());
  }
  return n;
}

absl::Status PostProcessorTemplate::Validate(int vocab_size) const {
  if (absl::Status status = ValidateSide(single, false, vocab_size); !status.ok()) return status;
  return ValidateSide(pair, true, vocab_size);
}

absl::StatusOr<PostProcessorTemplate> FamilyTemplate(const TokenizerFamilyDescriptor& descriptor,
                                                     const SpecialTokenIds& ids) {
  auto uses = [&](TemplateRole role) {
    for (const auto* side : {&descriptor.single_template, &descriptor.pair_template}) {
      for (const FamilyTemplateItem& item : *side) {
        if (item.role == role) return true;
      }
    }
    return false;
  };
  const std::tuple<TemplateRole, int32_t, const char*> roles[] = {
      {TemplateRole::kCls, ids.cls, "cls"},
      {TemplateRole::kSep, ids.sep, "sep"},
      {TemplateRole::kEos, ids.eos, "eos"}};
  for (const auto& [role, id, role_name] : roles) {
    if (uses(role) && id < 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          descriptor.name, " tokenizer: no ", role_name, " token for its template"));
    }
  }
  auto convert = [&](const std::vector<FamilyTemplateItem>& items) {
    std::vector<TemplatePiece> pieces;
    for (const FamilyTemplateItem& item : items) {
      switch (item.role) {
        case TemplateRole::kFirstText: pieces.push_back(Text(0, item.type_id)); break;
        case TemplateRole::kSecondText: pieces.push_back(Text(1, item.type_id)); break;
        case TemplateRole::kCls: pieces.push_back(Special(ids.cls, item.type_id)); break;
        case TemplateRole::kSep: pieces.push_back(Special(ids.sep, item.type_id)); break;
        case TemplateRole::kEos: pieces.push_back(Special(ids.eos, item.type_id)); break;
      }
      pieces.back().unless_text_ends_with_it = item.unless_text_ends_with_it;
    }
    return pieces;
  };
  PostProcessorTemplate t;
  t.single = convert(descriptor.single_template);
  t.pair = convert(descriptor.pair_template);
  return t;
}

PostProcessorTemplate TemplateFromJson(const TokenizerJson& json,
                                       const TokenizerFamilyDescriptor& family) {
  const bool types = family.uses_token_types;
  auto convert = [&](const std::vector<TokenizerJsonTemplateItem>& items) {
    std::vector<TemplatePiece> pieces;
    for (const TokenizerJsonTemplateItem& item : items) {
      pieces.push_back(TemplatePiece{item.sequence, item.ids, types ? item.type_id : 0});
    }
    return pieces;
  };
  PostProcessorTemplate t;
  if (!json.post_processor.has_value()) {
    // The `tokenizers` library without a post-processor: the texts alone, the second typed 1.
    t.single = {TemplatePiece{0, {}, 0}};
    t.pair = {TemplatePiece{0, {}, 0}, TemplatePiece{1, {}, types ? 1 : 0}};
    return t;
  }
  t.single = convert(json.post_processor->single);
  t.pair = convert(json.post_processor->pair);
  return t;
}

}  // namespace relserve
