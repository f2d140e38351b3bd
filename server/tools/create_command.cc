// relserve-model create: a randomly initialised model directory in Hugging Face's format.
#include "absl/strings/str_cat.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/tools/model_creator.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {

absl::Status RunCreateCommand(const std::vector<std::string>& argv) {
  ASSIGN_OR_RETURN(CliArgs args,
                   CliArgs::Parse(argv,
                                  {"family", "hidden", "layers", "heads", "intermediate", "vocab", "vocab-file",
                                   "embedding-size", "labels", "seed", "init-std", "dtype", "config", "dense-out",
                                   "out"},
                                  {"sentence-transformers", "overwrite"}));
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
  o.sentence_transformers = args.Bool("sentence-transformers");
  ASSIGN_OR_RETURN(o.dense_out, args.Int("dense-out", 0));
  o.overwrite = args.Bool("overwrite");
  return CreateModelDirectory(o, out);
}

}  // namespace relserve
