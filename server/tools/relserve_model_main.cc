// relserve-model: the engine from the command line (forward, tokenize, embed, create, bench, info).
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/tools/commands.h"
#include "server/util/process_tuning.h"

namespace {

constexpr char kUsage[] = R"(usage: relserve-model COMMAND [options]

commands:
  forward  --model DIR --inputs FILE.json --output FILE.safetensors [--pooled]
           transformers' forward on a padded batch (input_ids, attention_mask, token_type_ids);
           writes last_hidden_state, hidden_state_0..N and logits as float32
  tokenize --model DIR [--max-length N] [--no-truncate]
           one text per line on stdin (a tab separates a pair); JSON lines out
  embed    --model DIR [--batch-size N] [--pooling MODE] [--max-length N] [--no-truncate]
           one text per line on stdin; pooled embeddings as JSON lines
  create   --family deberta-v3|deberta-v2|t5|t5-v1.1 --out DIR [--hidden N --layers N --heads N
           --intermediate N --vocab N --vocab-file spm.model --labels N --embedding-size N
           --seed N --init-std X --dtype float32|bfloat16|float16 --config JSON
           --sentence-transformers --dense-out N --overwrite]
           writes a randomly initialised model directory in Hugging Face's format
  bench    --model DIR --batch B --seq L [--iters N --warmup N --gemm-size N --no-gemm]
           tokens per second, and the efficiency against this machine's matmul throughput
  info     --model DIR
           what the engine loaded, as JSON
  accuracy --model DIR --dtype bfloat16|float16 [--batch B --seq L]
           cosine of pooled embeddings and max |logit difference| against float32

options of commands that load a model:
  --dtype float32|bfloat16|float16   weights and activations (default float32)
  --device cpu|cuda|cuda:N          where the model runs (default cpu; cuda needs a CUDA build)
  --threads N                        compute threads (default: all cores)
  --max-length N                     longest sequence accepted (default: the model's)
  --pooling mean|cls|max|...         overrides the directory's pooling
)";

}  // namespace

int main(int argc, char** argv) {
  relserve::TuneProcessForInference(argv);
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h" ||
      std::string(argv[1]) == "help") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string command = argv[1];
  const std::vector<std::string> args(argv + 2, argv + argc);
  absl::Status (*run)(const std::vector<std::string>&) = nullptr;
  if (command == "forward") run = relserve::RunForwardCommand;
  else if (command == "tokenize") run = relserve::RunTokenizeCommand;
  else if (command == "embed") run = relserve::RunEmbedCommand;
  else if (command == "create") run = relserve::RunCreateCommand;
  else if (command == "bench") run = relserve::RunBenchCommand;
  else if (command == "info") run = relserve::RunInfoCommand;
  else if (command == "accuracy") run = relserve::RunAccuracyCommand;
  else {
    std::cerr << "relserve-model: unknown command \"" << command << "\"\n\n" << kUsage;
    return 2;
  }
  absl::Status status;
  try {
    status = run(args);
  } catch (const std::exception& e) {
    // The commands return their failures as statuses; this is the last line against one that
    // escapes (a library's exception), which would otherwise abort without a word.
    status = absl::InternalError(e.what());
  }
  if (!status.ok()) {
    std::cerr << "relserve-model " << command << ": " << status.message() << " ["
              << absl::StatusCodeToString(status.code()) << "]\n";
    return 1;
  }
  return 0;
}
