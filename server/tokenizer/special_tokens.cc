#include "server/tokenizer/special_tokens.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

struct Role {
  const char* role;  // for messages
  const std::string& name;
  int32_t reserved;
  int32_t fallback;
};

absl::StatusOr<int32_t> ResolveOne(const TokenizerFamilyDescriptor& family, const Role& role,
                                   const std::function<int(std::string_view)>& piece_to_id,
                                   int vocab_size) {
  int32_t id = role.name.empty() ? -1 : piece_to_id(role.name);
  const char* source = "piece";
  if (id < 0 && role.reserved >= 0) {
    id = role.reserved;
    source = "id reserved by the SentencePiece model";
  }
  if (id < 0) {
    id = role.fallback;
    source = "default id";
  }
  if (id >= vocab_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        family.name, " tokenizer: the vocabulary (", vocab_size,
        " pieces) has no piece \"", role.name, "\" for ", role.role, ", and the ", source, " ",
        id, " lies outside it"));
  }
  return id;
}

}  // namespace

SpecialTokenNames DefaultSpecialTokenNames(const TokenizerFamilyDescriptor& family) {
  return family.special_tokens;
}

absl::StatusOr<SpecialTokenIds> ResolveSpecialTokenIds(
    const TokenizerFamilyDescriptor& family, const SpecialTokenNames& names,
    const std::function<int(std::string_view)>& piece_to_id, const RelserveSpmReservedIds& reserved,
    int vocab_size) {
  auto resolve = [&](const char* role, const std::string& name, int32_t reserved_id,
                     int32_t fallback) {
    return ResolveOne(family, Role{role, name, reserved_id, fallback}, piece_to_id, vocab_size);
  };
  // A family without SentencePiece roles of its own resolves as T5 does.
  const SentencePieceRoleDefaults roles = family.sentencepiece_roles.value_or(
      SentencePieceRoleDefaults{/*pad=*/0, /*cls=*/-1, /*sep=*/-1, /*eos=*/1, /*unk=*/2});
  SpecialTokenIds ids;
  ASSIGN_OR_RETURN(ids.pad, resolve("pad", names.pad, reserved.pad, roles.pad));
  if (roles.cls >= 0) {
    ASSIGN_OR_RETURN(ids.cls, resolve("cls", names.cls, reserved.bos, roles.cls));
  }
  if (roles.sep >= 0) {
    ASSIGN_OR_RETURN(ids.sep, resolve("sep", names.sep, reserved.eos, roles.sep));
  }
  if (roles.eos >= 0) {
    ASSIGN_OR_RETURN(ids.eos, resolve("eos", names.eos, reserved.eos, roles.eos));
  }
  ASSIGN_OR_RETURN(ids.unk, resolve("unk", names.unk, reserved.unk, roles.unk));
  if (roles.eos < 0) ids.eos = ids.sep;
  return ids;
}

}  // namespace relserve
