// relserve-model: the engine from the command line (forward, tokenize, embed, create, bench, info,
// accuracy), Hub downloads (download) and checkpoint conversion (convert).
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/tools/cli_args.h"
#include "server/tools/commands.h"
#include "server/util/process_tuning.h"

namespace {

struct Command {
  const char* name;
  std::string synopsis;     // its options, as `relserve-model NAME` takes them
  const char* description;  // what it does
  bool engine_options;      // takes the options of commands that load a model
  absl::Status (*run)(const std::vector<std::string>&);
};

const std::vector<Command>& Commands() {
  static const std::vector<Command> kCommands = {
      {"forward", "--model DIR --inputs FILE.json --output FILE.safetensors [--pooled]",
       "transformers' forward on a padded batch (input_ids, attention_mask, token_type_ids);\n"
       "writes last_hidden_state, hidden_state_0..N and logits as float32 (--pooled: the pooled output too)",
       true, relserve::RunForwardCommand},
      {"tokenize",
       "--model DIR|ORG/REPO[@REVISION] [--max-length N] [--no-truncate] [--offline]\n"
       "[--padding longest|max_length]",
       "one text per line on stdin (a tab separates a pair); JSON lines out (input_ids, attention_mask,\n"
       "token_type_ids, truncated); a line that fails prints {\"error\": ...} and the exit code is 1;\n"
       "--padding pads every line to the longest one, or to the max length, on the family's side\n"
       "(the left for XLNet) with attention mask 0",
       false, relserve::RunTokenizeCommand},
      {"embed",
       "--model DIR [--batch-size N] [--pooling MODE] [--max-length N] [--no-truncate] [--prompt-name NAME]\n"
       "[--whole-input [--window-overlap N]] [--sparse] [--multi-vector]",
       "one text per line on stdin; pooled embeddings as JSON lines, in input order (--batch-size: lines\n"
       "per batch, default 32; --prompt-name: the sentence-transformers prompt put before each text, by\n"
       "default the model's default_prompt_name; --whole-input: texts longer than the model embedded in\n"
       "windows whose pooled vectors are averaged; --sparse, --multi-vector: the model's sparse vector\n"
       "and ColBERT token vectors too, as the server's Embed answers them)",
       true, relserve::RunEmbedCommand},
      {"zero-shot", "--model DIR --labels A,B,... [--template T] [--multi-label] [--no-truncate] [--batch-size N]",
       "one text per line on stdin; zero-shot classification with an NLI model as transformers'\n"
       "zero-shot-classification pipeline answers it: {sequence, labels, scores} per line, best first\n"
       "(--template: the hypothesis, default \"This example is {}.\"; --multi-label: each label on its own)",
       true, relserve::RunZeroShotCommand},
      {"create", relserve::CreateCommandSynopsis(),
       "writes a randomly initialised model directory in Hugging Face's format (--config: JSON keys merged\n"
       "into config.json; --sentence-transformers: pooling files, with a Dense layer of --dense-out outputs;\n"
       "a family's own options set their config.json keys)",
       false, relserve::RunCreateCommand},
      {"bench", "--model DIR --batch B --seq L [--iters N --warmup N --gemm-size N --no-gemm]",
       "tokens per second, and the efficiency against this machine's matmul throughput, as one JSON line",
       true, relserve::RunBenchCommand},
      {"info", "--model DIR", "what the engine loaded, as JSON", true, relserve::RunInfoCommand},
      {"accuracy", "--model DIR --dtype bfloat16|float16|int8 [--batch B --seq L]",
       "cosine of pooled embeddings and max |logit difference| against float32", true,
       relserve::RunAccuracyCommand},
      {"download", "--model ORG/REPO[@REVISION] [--offline]",
       "fetches what the Hub model needs into the Hugging Face cache (HF_HUB_CACHE, HF_HOME/hub or\n"
       "~/.cache/huggingface/hub; HF_ENDPOINT, HF_TOKEN) and prints its snapshot's folder; --offline\n"
       "checks the cache only",
       false, relserve::RunDownloadCommand},
      {"convert", "--model DIR --out DIR [--overwrite]",
       "writes the model's weights (pytorch_model.bin, sharded or not, or safetensors) as model.safetensors\n"
       "in --out, with copies of its config, tokenizer and sentence-transformers files; a summary as JSON",
       false, relserve::RunConvertCommand},
  };
  return kCommands;
}

constexpr char kEngineOptions[] = R"(options of commands that load a model:
  --model DIR|ORG/REPO[@REVISION]    a model directory, or a Hub model fetched into the Hugging Face
                                     cache (a path that exists wins)
  --offline                          Hub models from the cache only, no network (as HF_HUB_OFFLINE=1)
  --dtype float32|bfloat16|float16   weights and activations (default float32)
  --device cpu|cuda|cuda:N          where the model runs (default cpu; cuda needs a CUDA build)
  --threads N                        compute threads (default: all cores)
  --max-length N                     longest sequence accepted (default: the model's)
  --pooling mean|cls|max|...         overrides the directory's pooling
)";

// `text` with `prefix` before every line after the first.
std::string IndentContinuation(const std::string& text, const std::string& prefix) {
  std::string out;
  for (char c : text) {
    out += c;
    if (c == '\n') out += prefix;
  }
  return out;
}

std::string Indent(const std::string& text, const std::string& prefix) {
  return prefix + IndentContinuation(text, prefix);
}

std::string Usage() {
  std::string out = "usage: relserve-model COMMAND [options]\n\ncommands:\n";
  for (const Command& c : Commands()) {
    const std::string name = c.name;
    out += "  " + name + std::string(name.size() < 9 ? 9 - name.size() : 1, ' ') +
           IndentContinuation(c.synopsis, std::string(13, ' ')) + "\n";
    out += Indent(c.description, "           ") + "\n";
  }
  out += "\n";
  out += kEngineOptions;
  out += "\n`relserve-model COMMAND --help` shows one command. Exit codes: 0 success, 1 the command failed,\n"
         "2 bad usage (an unknown command or option, an option without its value).\n";
  return out;
}

std::string CommandUsage(const Command& c) {
  const std::string head = std::string("usage: relserve-model ") + c.name + " ";
  std::string out = head + IndentContinuation(c.synopsis, std::string(head.size() + 2, ' ')) + "\n\n" +
                    Indent(c.description, "  ") + "\n";
  if (c.engine_options) out += std::string("\n") + kEngineOptions;
  return out;
}

bool IsHelp(const std::string& arg) { return arg == "--help" || arg == "-h"; }

}  // namespace

int main(int argc, char** argv) {
  relserve::TuneProcessForInference(argv);
  if (argc < 2 || IsHelp(argv[1]) || std::string(argv[1]) == "help") {
    std::cout << Usage();
    return argc < 2 ? 2 : 0;
  }
  const std::string name = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  const Command* command = nullptr;
  for (const Command& c : Commands()) {
    if (name == c.name) command = &c;
  }
  if (command == nullptr) {
    std::cerr << "relserve-model: unknown command \"" << name << "\"\n\n" << Usage();
    return 2;
  }
  for (const std::string& a : args) {
    if (IsHelp(a)) {
      std::cout << CommandUsage(*command);
      return 0;
    }
  }
  absl::Status status;
  try {
    status = command->run(args);
  } catch (const std::exception& e) {
    // The commands return their failures as statuses; this is the last line against one that
    // escapes (a library's exception), which would otherwise abort without a word.
    status = absl::InternalError(e.what());
  }
  if (relserve::IsUsageError(status)) {
    std::cerr << "relserve-model " << name << ": " << status.message() << "\n(see relserve-model " << name
              << " --help)\n";
    return 2;
  }
  if (!status.ok()) {
    std::cerr << "relserve-model " << name << ": " << status.message() << " ["
              << absl::StatusCodeToString(status.code()) << "]\n";
    return 1;
  }
  return 0;
}
