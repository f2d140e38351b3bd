// relserve-model create: a randomly initialised model directory in Hugging Face's format.
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
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

absl::Status RunCreate(const CliArgs& args) {
  CreateModelOptions o;
  ASSIGN_OR_RETURN(o.family, args.Required("family"));
  ASSIGN_OR_RETURN(std::string out, args.Required("out"));
  o.hidden = args.Int("hidden");
  o.layers = args.Int("layers");
  o.heads = args.Int("heads");
  o.intermediate = args.Int("intermediate");
  o.vocab = args.Int("vocab");
  o.embedding_size = args.Int("embedding-size");
  o.num_labels = args.Int("labels");
  o.seed = static_cast<uint64_t>(args.Int("seed"));
  if (args.Has("init-std")) {
    try {
      o.init_std = std::stof(args.String("init-std"));
    } catch (...) {
      return absl::InvalidArgumentError("--init-std must be a number");
    }
  }
  o.vocab_file = args.String("vocab-file");
  o.sentencepiece.path = args.String("sentencepiece-module");
  o.dtype = args.String("dtype");
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
  o.dense_out = args.Int("dense-out");
  o.overwrite = args.Bool("overwrite");
  return CreateModelDirectory(o, out);
}

// A family's own option: a string whose value OptionValue reads as its config key's type.
Flag<CliArgs> FamilyOptionFlag(const CreateOption& option) {
  const char* value_name = "VALUE";
  switch (option.type) {
    case CreateOption::Type::kString:
      break;
    case CreateOption::Type::kInt:
      value_name = "N";
      break;
    case CreateOption::Type::kNumber:
      value_name = "X";
      break;
    case CreateOption::Type::kBool:
      value_name = "true|false";
      break;
  }
  return CliString(option.flag, value_name, absl::StrCat(option.help, "; sets config.json's ", option.config_key), "",
                   {}, "the family's");
}

}  // namespace

ModelCommand CreateCommand() {
  std::vector<Flag<CliArgs>> own = {
      CliRequired("family", absl::StrJoin(absl::StrSplit(SupportedCreateVariants(), ", "), "|"),
                  "the model family and variant"),
      CliRequired("out", "DIR", "where the model directory is written"),
      CliInt("hidden", "hidden size", 0, 0, "N", "the family's"),
      CliInt("layers", "encoder layers", 0, 0, "N", "the family's"),
      CliInt("heads", "attention heads", 0, 0, "N", "the family's"),
      CliInt("intermediate", "feed-forward size", 0, 0, "N", "the family's"),
      CliInt("vocab", "vocabulary size", 0, 0, "N", "the family's, or --vocab-file's"),
      CliString("vocab-file", "FILE",
                "the tokenizer's vocabulary, copied into the directory (spm.model, spiece.model, a WordPiece "
                "vocab.txt for bert, electra and mpnet, sentencepiece.bpe.model for xlm-roberta)"),
      SentencePieceModuleFlag(),
      CliInt("labels", "classification labels (a sequence-classification head)", 0, 0),
      CliInt("embedding-size", "embedding size, where the family has one apart from --hidden", 0, 0, "N",
             "the family's"),
      CliInt("seed", "seed of the random weights", 1, 0),
      CliString("init-std", "X", "standard deviation of the random weights", "", {}, "0.02"),
      CliString("dtype", "float32|bfloat16|float16", "the weights' storage type", "float32",
                {"float32", "bfloat16", "float16"}),
      CliString("config", "JSON", "a JSON object whose keys are merged into config.json (the weights follow them)"),
      CliBool("sentence-transformers", "sentence-transformers pooling files too"),
      CliInt("dense-out", "outputs of a sentence-transformers Dense layer after pooling", 0, 0, "N",
             "0: no Dense layer"),
      CliBool("overwrite", "write into an --out that exists and is not empty"),
  };
  std::vector<Flag<CliArgs>> family;
  for (const CreateOption& o : FamilyCreateOptions()) family.push_back(FamilyOptionFlag(o).In("family options"));
  return {"create", "writes a randomly initialised model directory in Hugging Face's format",
          CliFlags({std::move(own), std::move(family)}), RunCreate};
}

}  // namespace relserve
