#include "server/tokenizer/post_processor_template.h"

#include "absl/strings/str_cat.h"

namespace relserve {
namespace {

TemplatePiece Special(int32_t id, int32_t type_id) { return TemplatePiece{-1, {id}, type_id}; }
TemplatePiece Text(int sequence, int32_t type_id) { return TemplatePiece{sequence, {}, type_id}; }
// T5Tokenizer._add_eos_if_not_present: no </s> after a text whose ids end with it already.
TemplatePiece SpecialUnlessPresent(int32_t id) {
  TemplatePiece piece = Special(id, 0);
  piece.unless_text_ends_with_it = true;
  return piece;
}

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

absl::StatusOr<PostProcessorTemplate> FamilyTemplate(TokenizerFamily family,
                                                     const SpecialTokenIds& ids) {
  auto missing = [&](const char* role) {
    return absl::InvalidArgumentError(absl::StrCat(
        TokenizerFamilyName(family), " tokenizer: no ", role, " token for its template"));
  };
  PostProcessorTemplate t;
  switch (family) {
    case TokenizerFamily::kDeberta:
    case TokenizerFamily::kBert:
      if (ids.cls < 0) return missing("cls");
      if (ids.sep < 0) return missing("sep");
      t.single = {Special(ids.cls, 0), Text(0, 0), Special(ids.sep, 0)};
      t.pair = {Special(ids.cls, 0), Text(0, 0), Special(ids.sep, 0), Text(1, 1),
                Special(ids.sep, 1)};
      break;
    case TokenizerFamily::kMpnet:
    case TokenizerFamily::kRoberta:
    case TokenizerFamily::kXlmRoberta:
      if (ids.cls < 0) return missing("cls");
      if (ids.sep < 0) return missing("sep");
      t.single = {Special(ids.cls, 0), Text(0, 0), Special(ids.sep, 0)};
      t.pair = {Special(ids.cls, 0), Text(0, 0), Special(ids.sep, 0), Special(ids.sep, 0),
                Text(1, 0), Special(ids.sep, 0)};
      break;
    case TokenizerFamily::kT5:
      if (ids.eos < 0) return missing("eos");
      // build_inputs_with_special_tokens runs _add_eos_if_not_present on each text.
      t.single = {Text(0, 0), SpecialUnlessPresent(ids.eos)};
      t.pair = {Text(0, 0), SpecialUnlessPresent(ids.eos), Text(1, 0), SpecialUnlessPresent(ids.eos)};
      break;
    case TokenizerFamily::kXlnet:
      // XLNetTokenizer's segment ids: A and its <sep> 0, B and its <sep> 1, <cls> 2.
      if (ids.cls < 0) return missing("cls");
      if (ids.sep < 0) return missing("sep");
      t.single = {Text(0, 0), Special(ids.sep, 0), Special(ids.cls, 2)};
      t.pair = {Text(0, 0), Special(ids.sep, 0), Text(1, 1), Special(ids.sep, 1),
                Special(ids.cls, 2)};
      break;
  }
  return t;
}

bool FamilyUsesTokenTypes(TokenizerFamily family) {
  return family == TokenizerFamily::kDeberta || family == TokenizerFamily::kBert ||
         family == TokenizerFamily::kXlnet;
}

}  // namespace relserve
