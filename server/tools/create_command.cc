// relserve-model create: a randomly initialised model directory in Hugging Face's format.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/model/families/family_registry.h"
#include "server/tools/model_creator.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

// `--flag VALUE` of a family's create option as the JSON value its config key takes.
absl::StatusOr<nlohmann::json> OptionValue(const CreateOption& option, const std::string& text) {
  const std::string flag = "--" + option.flag;
  switch (option.type) {
    case CreateOption::Type::kString:
      return nlohmann::json(text);
    case CreateOption::Type::kBool:
      if (text == "true" || text == "false") return nlohmann::json(text == "true");
      return absl::InvalidArgumentError(absl::StrCat(flag, " must be true or false, got \"", text, "\""));
    case CreateOption::Type::kInt:
    case CreateOption::Type::kNumber: {
      auto value = ParseJson(text, flag);
      const bool ok = value.ok() && (option.type == CreateOption::Type::kInt ? value->is_number_integer() : value->is_number());
      if (!ok) {
        return absl::InvalidArgumentError(absl::StrCat(flag, " must be ", option.type == CreateOption::Type::kInt ? "an integer" : "a number",
                                                       ", got \"", text, "\""));
      }
      return *value;
    }
  }
  return nlohmann::json(text);
}

std::vector<CreateOption> FamilyCreateOptions() {
  std::vector<CreateOption> all;
  for (const FamilyDescriptor* family : AllFamilies()) {
    for (const CreateOption& o : family->create_options()) {
      bool seen = false;
      for (const CreateOption& a : all) seen = seen || a.flag == o.flag;
      if (!seen) all.push_back(o);
    }
  }
  return all;
}

}  // namespace

std::string CreateCommandSynopsis() {
  std::string out = absl::StrCat(
      "--family ", absl::StrJoin(absl::StrSplit(SupportedCreateVariants(), ", "), "|"),
      " --out DIR [--hidden N --layers N --heads N\n"
      "--intermediate N --vocab N --vocab-file FILE --labels N --embedding-size N\n"
      "--seed N --init-std X --dtype float32|bfloat16|float16 --config JSON\n"
      "--sentence-transformers --dense-out N --overwrite]");
  for (const CreateOption& o : FamilyCreateOptions()) absl::StrAppend(&out, "\n[--", o.flag, " ", o.help, "]");
  return out;
}

absl::Status RunCreateCommand(const std::vector<std::string>& argv) {
  std::set<std::string> known = {"family", "hidden", "layers", "heads", "intermediate", "vocab", "vocab-file",
                                 "embedding-size", "labels", "seed", "init-std", "dtype", "config", "dense-out",
                                 "out"};
  for (const CreateOption& o : FamilyCreateOptions()) known.insert(o.flag);
  ASSIGN_OR_RETURN(CliArgs args, CliArgs::Parse(argv, known, {"sentence-transformers", "overwrite"}));
  CreateModelOptions o;
  ASSIGN_OR_RETURN(o.family, args.Required("family"));
  ASSIGN_OR_RETURN(std::string out, args.Required("out"));
  ASSIGN_OR_RETURN(o.hidden, args.Int("hidden", 0));
  ASSIGN_OR_RETURN(o.layers, args.Int("layers", 0));
  ASSIGN_OR_RETURN(o.heads, args.Int("heads", 0));
  ASSIGN_OR_RETURN(o.intermediate, args.Int("intermediate", 0));
  ASSIGN_OR_RETURN(o.vocab, args.Int("vocab", 0));
  ASSIGN_OR_RETURN(o.embedding_size, args.Int("embedding-size", 0));
  ASSIGN_OR_RETURN(o.num_labels, args.Int("labels", 0));
  ASSIGN_OR_RETURN(int seed, args.Int("seed", 1));
  o.seed = static_cast<uint64_t>(seed);
  if (args.Has("init-std")) {
    try {
      o.init_std = std::stof(args.String("init-std"));
    } catch (...) {
      return absl::InvalidArgumentError("--init-std must be a number");
    }
  }
  o.vocab_file = args.String("vocab-file");
  o.dtype = args.String("dtype", "float32");
  if (args.Has("config")) {
    // --config '{"share_att_key": false}': keys merged into config.json; weights follow them.
    ASSIGN_OR_RETURN(o.config_overrides, ParseJson(args.String("config"), "--config"));
    if (!o.config_overrides.is_object()) return absl::InvalidArgumentError("--config must be a JSON object");
  }
  // The family's own options (--position-embedding-type ...) set their config.json keys.
  const FamilyDescriptor* family = FindFamilyByCreateVariant(o.family);
  for (const CreateOption& option : FamilyCreateOptions()) {
    if (!args.Has(option.flag)) continue;
    bool offered = false;
    for (const CreateOption& own : family ? family->create_options() : std::vector<CreateOption>()) {
      offered = offered || own.flag == option.flag;
    }
    if (family != nullptr && !offered) {
      return absl::InvalidArgumentError(absl::StrCat("--", option.flag, " is not an option of family ", o.family));
    }
    if (o.config_overrides.contains(option.config_key)) {
      return absl::InvalidArgumentError(absl::StrCat("--", option.flag, " and --config both set \"", option.config_key, "\""));
    }
    ASSIGN_OR_RETURN(o.config_overrides[option.config_key], OptionValue(option, args.String(option.flag)));
  }
  o.sentence_transformers = args.Bool("sentence-transformers");
  ASSIGN_OR_RETURN(o.dense_out, args.Int("dense-out", 0));
  o.overwrite = args.Bool("overwrite");
  return CreateModelDirectory(o, out);
}

}  // namespace relserve
