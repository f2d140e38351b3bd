// relserve-model accuracy: how far a reduced-precision engine lands from float32 on the same
// random inputs (cosine of pooled embeddings, max |difference| of logits).
#include <cmath>
#include <iostream>
#include <random>

#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/tools/commands.h"
#include "server/tools/engine_flags.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

absl::Status RunAccuracy(const CliArgs& args) {
  const int batch = args.Int("batch");
  const int seq = args.Int("seq");
  std::string dir;
  ASSIGN_OR_RETURN(auto reduced, LoadEngineFromFlags(args, &dir));
  EngineOptions f32_options;
  f32_options.pooling = args.String("pooling");
  f32_options.device = args.String("device");
  f32_options.max_length = args.Int("max-length");
  ASSIGN_OR_RETURN(auto full, Engine::Load(dir, f32_options));

  // Lengths spread over [seq/4, seq] so that padding is part of what is compared.
  std::mt19937 rng(42);
  const int vocab = full->info().vocab_size;
  std::uniform_int_distribution<int> token(std::min(5, vocab - 1), vocab - 1);
  std::uniform_int_distribution<int> length(std::max(1, seq / 4), seq);
  std::vector<SequenceInput> inputs(batch);
  for (SequenceInput& s : inputs) {
    s.input_ids.resize(length(rng));
    for (int& id : s.input_ids) id = token(rng);
  }
  const uint32_t outputs = kOutputPooled | (full->info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits));
  ASSIGN_OR_RETURN(auto want, full->Run(inputs, outputs));
  ASSIGN_OR_RETURN(auto got, reduced->Run(inputs, outputs));
  double min_cos = 1, sum_cos = 0, max_logit = 0;
  for (size_t i = 0; i < inputs.size(); ++i) {
    double ab = 0, aa = 0, bb = 0;
    for (size_t k = 0; k < want[i].pooled.size(); ++k) {
      ab += double(want[i].pooled[k]) * got[i].pooled[k];
      aa += double(want[i].pooled[k]) * want[i].pooled[k];
      bb += double(got[i].pooled[k]) * got[i].pooled[k];
    }
    const double cos = ab / std::sqrt(aa * bb);
    min_cos = std::min(min_cos, cos);
    sum_cos += cos;
    for (size_t k = 0; k < want[i].logits.size(); ++k) {
      max_logit = std::max(max_logit, std::fabs(double(want[i].logits[k]) - got[i].logits[k]));
    }
  }
  nlohmann::json out = {{"dtype", DTypeName(reduced->info().dtype)}, {"model_type", full->info().model_type},
                        {"batch", batch}, {"max_seq", seq},
                        {"pooled_cosine_min", min_cos}, {"pooled_cosine_mean", sum_cos / inputs.size()}};
  if (outputs & kOutputLogits) out["logits_max_abs_diff"] = max_logit;
  std::cout << out.dump() << std::endl;
  return absl::OkStatus();
}

}  // namespace

ModelCommand AccuracyCommand() {
  return {"accuracy",
          "cosine of pooled embeddings and max |logit difference| of the --dtype engine against float32",
          CliFlags({{CliInt("batch", "sequences compared", 8, 1),
                     CliInt("seq", "the longest sequence (lengths spread over [seq/4, seq])", 128, 1)},
                    EngineFlags()}),
          RunAccuracy};
}

}  // namespace relserve
