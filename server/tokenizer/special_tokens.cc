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

absl::StatusOr<int32_t> ResolveOne(TokenizerFamily family, const Role& role,
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
        TokenizerFamilyName(family), " tokenizer: the vocabulary (", vocab_size,
        " pieces) has no piece \"", role.name, "\" for ", role.role, ", and the ", source, " ",
        id, " lies outside it"));
  }
  return id;
}

}  // namespace

SpecialTokenNames DefaultSpecialTokenNames(TokenizerFamily family) {
  SpecialTokenNames names;
  switch (family) {
    case TokenizerFamily::kDeberta:
      names.pad = "[PAD]", names.unk = "[UNK]", names.cls = "[CLS]", names.sep = "[SEP]";
      names.mask = "[MASK]", names.bos = "[CLS]";
      break;
    case TokenizerFamily::kT5:
      names.pad = "<pad>", names.unk = "<unk>", names.eos = "</s>";
      break;
    case TokenizerFamily::kBert:
      names.pad = "[PAD]", names.unk = "[UNK]", names.cls = "[CLS]", names.sep = "[SEP]";
      names.mask = "[MASK]";
      break;
    case TokenizerFamily::kMpnet:
      // MPNetTokenizer keeps BERT's unknown token.
      names.pad = "<pad>", names.unk = "[UNK]", names.cls = "<s>", names.sep = "</s>";
      names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
      break;
    case TokenizerFamily::kXlnet:
      names.pad = "<pad>", names.unk = "<unk>", names.cls = "<cls>", names.sep = "<sep>";
      names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
      names.additional = {"<eop>", "<eod>"};
      break;
    case TokenizerFamily::kRoberta:
    case TokenizerFamily::kXlmRoberta:
      names.pad = "<pad>", names.unk = "<unk>", names.cls = "<s>", names.sep = "</s>";
      names.eos = "</s>", names.bos = "<s>", names.mask = "<mask>";
      break;
  }
  return names;
}

absl::StatusOr<SpecialTokenIds> ResolveSpecialTokenIds(
    TokenizerFamily family, const SpecialTokenNames& names,
    const std::function<int(std::string_view)>& piece_to_id, const RelserveSpmReservedIds& reserved,
    int vocab_size) {
  auto resolve = [&](const char* role, const std::string& name, int32_t reserved_id,
                     int32_t fallback) {
    return ResolveOne(family, Role{role, name, reserved_id, fallback}, piece_to_id, vocab_size);
  };
  SpecialTokenIds ids;
  ASSIGN_OR_RETURN(ids.pad, resolve("pad", names.pad, reserved.pad, 0));
  if (family == TokenizerFamily::kDeberta) {
    ASSIGN_OR_RETURN(ids.cls, resolve("cls", names.cls, reserved.bos, 1));
    ASSIGN_OR_RETURN(ids.sep, resolve("sep", names.sep, reserved.eos, 2));
    ASSIGN_OR_RETURN(ids.unk, resolve("unk", names.unk, reserved.unk, 3));
    ids.eos = ids.sep;
  } else {
    ASSIGN_OR_RETURN(ids.eos, resolve("eos", names.eos, reserved.eos, 1));
    ASSIGN_OR_RETURN(ids.unk, resolve("unk", names.unk, reserved.unk, 2));
  }
  return ids;
}

}  // namespace relserve
