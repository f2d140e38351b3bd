#ifndef RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_
#define RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/engine.h"
#include "server/tools/cli_args.h"

namespace relserve {

// The option groups relserve-model's commands share, declared once, listed under the heading
// "model options" in each command's --help and in the top-level one.
//
// --model DIR|ORG/REPO[@REVISION] and --offline: every command that reads a model by name.
std::vector<Flag<CliArgs>> ModelFlags();
// --max-length N: the longest sequence (0: the model's).
Flag<CliArgs> MaxLengthFlag();
// --no-truncate: a text longer than the max length is an error (tokenize, embed, zero-shot).
Flag<CliArgs> NoTruncateFlag();
// --sentencepiece-module FILE (or RELSERVE_SENTENCEPIECE_MODULE, in a CliFlagTable): the
// SentencePiece module every command that reads a SentencePiece vocabulary loads it with.
Flag<CliArgs> SentencePieceModuleFlag();
// The model flags, --dtype, --device, --threads, --max-length and --pooling: every command
// that loads an engine (LoadEngineFromFlags).
std::vector<Flag<CliArgs>> EngineFlags();

// The directory --model names: the value itself, or the snapshot of a Hub model
// (org/repo[@revision]) in the Hugging Face cache, fetched where files are missing unless
// --offline or HF_HUB_OFFLINE (server/hub/model_resolver.h). Progress goes to standard error.
absl::StatusOr<std::string> ModelDirFromFlags(const CliArgs& args);
// Sets the thread count and loads the engine named by --model (ModelDirFromFlags); the
// directory it loaded goes to *loaded_dir when given.
absl::StatusOr<LoadedModel> LoadModelFromFlags(const CliArgs& args, std::string* loaded_dir = nullptr);
// The engine alone, for commands that take no text (its ModelInfo still names the tokenizer).
absl::StatusOr<std::unique_ptr<Engine>> LoadEngineFromFlags(const CliArgs& args, std::string* loaded_dir = nullptr);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOOLS_ENGINE_FLAGS_H_
