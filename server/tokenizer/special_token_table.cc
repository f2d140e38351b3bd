#include "server/tokenizer/special_token_table.h"

#include <algorithm>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

bool UsesSentencePieceRoles(const TokenizerFamilyDescriptor& family) {
  return family.sentencepiece_roles.has_value();
}

// How the tokenizer class wraps a special token it is handed as a plain string.
AddedTokenFlags ClassDefaultFlags(const TokenizerFamilyDescriptor& descriptor,
                                  const SpecialTokenNames& names, const std::string& content) {
  AddedTokenFlags flags;
  flags.special = true;
  if (descriptor.mask_strips_left && content == names.mask) flags.lstrip = true;
  if (descriptor.has_extra_ids && content.rfind("<extra_id_", 0) == 0) {
    flags.lstrip = flags.rstrip = true;
  }
  return flags;
}

}  // namespace

absl::StatusOr<SpecialTokenTable> BuildSpecialTokenTable(const TokenizerFamilyDescriptor& family,
                                                         const TokenizerConfig& config,
                                                         const TextModel& model,
                                                         const RelserveSpmReservedIds& reserved) {
  const SpecialTokenNames& names = config.special_tokens;
  SpecialTokenTable table;

  std::map<std::string, int32_t> added_ids;  // a content listed twice answers with its last id
  int32_t next_id = model.vocab_size();
  for (const auto& [id, entry] : config.added_tokens) {
    added_ids[entry.content] = id;
    next_id = std::max(next_id, id + 1);
  }

  // The special tokens in transformers' order (SPECIAL_TOKENS_ATTRIBUTES), T5's extra ids last.
  std::vector<std::string> specials = {names.bos, names.eos, names.unk, names.sep,
                                       names.pad, names.cls, names.mask};
  specials.insert(specials.end(), names.additional.begin(), names.additional.end());
  std::map<std::string, int32_t> extra_ids;
  if (family.has_extra_ids) {
    for (int i = 0; i < config.extra_ids; ++i) {
      const std::string name = absl::StrCat("<extra_id_", i, ">");
      extra_ids[name] = model.vocab_size() - 1 + config.extra_ids - i;
      specials.push_back(name);
    }
  }

  std::map<std::string, int32_t> role_ids;
  if (UsesSentencePieceRoles(family)) {
    auto ids = ResolveSpecialTokenIds(
        family, names, [&model](std::string_view piece) { return model.PieceToId(piece); },
        reserved, model.vocab_size());
    if (!ids.ok()) return ids.status();
    table.ids = *ids;
    for (const auto& [name, id] : {std::pair{names.pad, ids->pad}, {names.unk, ids->unk},
                                   {names.cls, ids->cls}, {names.sep, ids->sep},
                                   {names.eos, ids->eos}}) {
      if (!name.empty() && id >= 0) role_ids.emplace(name, id);
    }
  }

  std::map<std::string, int32_t> special_ids;
  for (const std::string& name : specials) {
    if (name.empty() || special_ids.count(name) > 0) continue;
    int32_t id = -1;
    if (auto it = role_ids.find(name); it != role_ids.end()) {
      id = it->second;
    } else if (auto added = added_ids.find(name); added != added_ids.end()) {
      id = added->second;
    } else if (auto extra = extra_ids.find(name); extra != extra_ids.end()) {
      id = extra->second;
    } else if (const int piece = model.PieceToId(name); piece >= 0) {
      id = piece;
    } else {
      id = next_id++;
    }
    special_ids[name] = id;
    auto flags_it = config.token_flags.find(name);
    const AddedTokenFlags flags = flags_it != config.token_flags.end()
                                      ? flags_it->second
                                      : ClassDefaultFlags(family, names, name);
    AddedToken token;
    token.content = name;
    token.id = id;
    token.lstrip = flags.lstrip;
    token.rstrip = flags.rstrip;
    token.single_word = flags.single_word;
    token.keeps_case = true;  // all_special_tokens are kept out of the lower-casing
    token.special = true;
    table.added.push_back(std::move(token));
  }

  if (!UsesSentencePieceRoles(family)) {
    auto id_of = [&](const std::string& name) {
      auto it = special_ids.find(name);
      return name.empty() || it == special_ids.end() ? -1 : it->second;
    };
    table.ids.pad = id_of(names.pad);
    table.ids.unk = id_of(names.unk);
    table.ids.cls = id_of(names.cls);
    table.ids.sep = id_of(names.sep);
    table.ids.eos = names.eos.empty() ? table.ids.sep : id_of(names.eos);
    if (table.ids.unk < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(family.name, " tokenizer: no unknown token (unk_token)"));
    }
  }
  table.ids.mask = names.mask.empty() ? -1 : special_ids[names.mask];

  for (const auto& [id, entry] : config.added_tokens) {
    if (special_ids.count(entry.content) > 0 || added_ids[entry.content] != id) continue;
    AddedToken token;
    token.content = entry.content;
    token.id = id;
    token.lstrip = entry.flags.lstrip;
    token.rstrip = entry.flags.rstrip;
    token.single_word = entry.flags.single_word;
    token.keeps_case = !entry.flags.special && entry.flags.IsNormalized();
    table.added.push_back(std::move(token));
  }

  table.vocab_size = model.vocab_size();
  for (const AddedToken& token : table.added) table.vocab_size = std::max(table.vocab_size, token.id + 1);
  return table;
}

}  // namespace relserve
