#ifndef RELSERVE_TESTS_MODEL_SWITCH_TEST_SUPPORT_H_
#define RELSERVE_TESTS_MODEL_SWITCH_TEST_SUPPORT_H_

// Shared by the switch tests of every family: model directories made by the creator and then
// edited, random padded batches, and engine-versus-port comparisons.
#include <unistd.h>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "server/model/engine.h"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/safetensors/safetensors_writer.h"
#include "server/tools/model_creator.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "tests/model/naive_reference.h"
#include "tests/model/reference_fixture.h"

namespace relserve::testing {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Model directories.

struct F32Tensor {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
using F32Map = std::map<std::string, F32Tensor>;
using Edit = std::function<void(json& config, F32Map& weights)>;

inline F32Map ReadWeights(const std::string& dir) {
  auto ckpt = SafetensorsCheckpoint::OpenDirectory(dir);
  if (!ckpt.ok()) throw std::runtime_error(std::string(ckpt.status().message()));
  F32Map out;
  for (const std::string& name : (*ckpt)->Names()) {
    const TensorView* v = (*ckpt)->Find(name);
    if (v->dtype != StDType::kF32) throw std::runtime_error("not F32: " + name);
    F32Tensor t{v->shape, std::vector<float>(static_cast<size_t>(v->numel()))};
    std::memcpy(t.data.data(), v->data, v->nbytes);
    out.emplace(name, std::move(t));
  }
  return out;
}

inline void WriteWeights(const std::string& dir, const F32Map& weights) {
  SafetensorsWriter writer;
  writer.SetMetadata({{"format", "pt"}});
  for (const auto& [name, t] : weights) {
    auto st = writer.Add(name, StDType::kF32, t.shape, t.data.data(), t.data.size() * sizeof(float));
    if (!st.ok()) throw std::runtime_error(std::string(st.message()));
  }
  auto st = writer.WriteFile(JoinPath(dir, "model.safetensors"));
  if (!st.ok()) throw std::runtime_error(std::string(st.message()));
}

inline bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The creator initialises biases to 0 and layer norms to 1 / 0, which would hide a missing
// bias or norm weight; give them random values too (deterministic per tensor name, so models
// that share a tensor name share its values).
inline void RandomizeVectors(F32Map* weights, uint64_t seed) {
  for (auto& [name, t] : *weights) {
    const bool norm_weight = EndsWith(name, "LayerNorm.weight") || EndsWith(name, "layer_norm.weight");
    if (!EndsWith(name, ".bias") && !norm_weight) continue;
    std::mt19937_64 rng(seed * 1000003u ^ std::hash<std::string>{}(name));
    std::normal_distribution<float> normal(0.0f, 0.2f);
    for (float& v : t.data) v = (norm_weight ? 1.0f : 0.0f) + normal(rng);
  }
}

inline void Scale(F32Map* weights, const std::string& name, float factor) {
  auto it = weights->find(name);
  if (it == weights->end()) throw std::runtime_error("no tensor " + name);
  for (float& v : it->second.data) v *= factor;
}

// A folder for one test's models, removed afterwards.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = (fs::temp_directory_path() / "relserve-switches-XXXXXX").string();
    if (mkdtemp(tmpl.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    root_ = tmpl;
  }
  ~ScratchDir() {
      RemoveTree(root_);
  }
  std::string Path(const std::string& name) const { return JoinPath(root_, name); }

 private:
  std::string root_;
};

// ---------------------------------------------------------------------------------------------
// Batches and comparisons.

inline PaddedBatch MakeBatch(const std::vector<int64_t>& lengths, int64_t vocab, uint64_t seed, bool pairs = false) {
  PaddedBatch b;
  b.batch = static_cast<int64_t>(lengths.size());
  b.length = *std::max_element(lengths.begin(), lengths.end());
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> id(1, vocab - 1);
  for (int64_t n : lengths) {
    for (int64_t t = 0; t < b.length; ++t) {
      const bool real = t < n;
      b.input_ids.push_back(real ? id(rng) : 0);
      b.attention_mask.push_back(real ? 1 : 0);
      if (pairs) b.token_type_ids.push_back(real && t >= n / 2 ? 1 : 0);
    }
  }
  return b;
}

using EngineOutputs = std::map<std::string, NamedTensor>;

inline EngineOutputs RunEngine(const std::string& dir, const PaddedBatch& batch) {
  auto engine = Engine::Load(dir, testing::TestEngineOptions());
  if (!engine.ok()) throw std::runtime_error("Engine::Load: " + std::string(engine.status().message()));
  auto outputs = (*engine)->ForwardPadded(batch, /*all_hidden_states=*/true);
  if (!outputs.ok()) throw std::runtime_error("ForwardPadded: " + std::string(outputs.status().message()));
  EngineOutputs out;
  for (NamedTensor& t : *outputs) out[t.name] = std::move(t);
  return out;
}

// The model at `dir` loaded on the CPU twice: with float32's packed GEMM, the default, and with
// OpenBLAS alone (--float32-gemm blas), for tests that compare an output of the two. Throws where
// either fails to load.
struct PackedAndBlasEngines {
  std::unique_ptr<Engine> packed;
  std::unique_ptr<Engine> blas;
};

inline PackedAndBlasEngines LoadPackedAndBlas(const std::string& dir) {
  EngineOptions options = testing::TestEngineOptions();
  options.device = "cpu";
  PackedAndBlasEngines engines;
  for (const bool packed : {true, false}) {
    options.kernels.packed_float32_gemm = packed;
    auto engine = Engine::Load(dir, options);
    if (!engine.ok()) throw std::runtime_error("Engine::Load: " + std::string(engine.status().message()));
    (packed ? engines.packed : engines.blas) = std::move(*engine);
  }
  return engines;
}

inline naive::Outputs RunNaive(const std::string& dir, const PaddedBatch& batch) {
  auto outputs = naive::Forward(dir, batch);
  if (!outputs.ok()) throw std::runtime_error(std::string(outputs.status().message()));
  return std::move(*outputs);
}

// Largest difference of one tensor at the unpadded positions.
inline double Diff(const NamedTensor& a, const NamedTensor& b, const PaddedBatch& batch) {
  return MaxAbsDiffMasked(a, b.data, b.shape, batch);
}
inline double Diff(const EngineOutputs& a, const EngineOutputs& b, const PaddedBatch& batch,
            const std::string& name = "last_hidden_state") {
  if (!a.count(name) || !b.count(name)) return INFINITY;
  return Diff(a.at(name), b.at(name), batch);
}
inline double Diff(const EngineOutputs& a, const naive::Outputs& b, const PaddedBatch& batch,
            const std::string& name = "last_hidden_state") {
  if (!a.count(name) || !b.count(name)) return INFINITY;
  return Diff(a.at(name), naive::ToNamedTensor(name, b.at(name)), batch);
}



// Every activation name of transformers' ACT2FN the engine implements.
inline const std::vector<std::string>& AllActivations() {
  static const std::vector<std::string> kNames = {
      "gelu",       "gelu_new", "gelu_pytorch_tanh", "gelu_fast", "gelu_accurate", "gelu_python",
      "quick_gelu", "gelu_10",  "relu",              "relu2",     "relu6",         "leaky_relu",
      "silu",       "swish",    "mish",              "tanh",      "sigmoid",       "linear"};
  return kNames;
}

// Activations whose outputs at these scales are within a few 1e-4 of the exact gelu (tanh
// approximations) or equal to it (gelu_python; gelu_10 below |x| = 10), or to each other.
inline bool CloseToGelu(const std::string& act) {
  return act == "gelu_new" || act == "gelu_pytorch_tanh" || act == "gelu_fast" || act == "gelu_accurate" ||
         act == "gelu_python" || act == "gelu_10";
}

// The fixture both switch suites share: scratch model directories made by the creator and
// then edited, and the check of the engine against the port on a padded batch and on one
// unpadded row.
class SwitchTestBase : public ::testing::Test {
 protected:
  static constexpr double kTolerance = 1e-4;
  static constexpr double kMatters = 100 * kTolerance;
  static constexpr int64_t kVocab = 128;

  // Tiny models (hidden 32, 2 layers, 4 heads, intermediate 64, vocab 128) with large weights,
  // so that a wrong term shows far above the tolerance.
  static CreateModelOptions TinyOptions(const std::string& family, const json& overrides) {
    CreateModelOptions o;
    o.family = family;
    o.hidden = 32;
    o.layers = 2;
    o.heads = 4;
    o.intermediate = 64;
    o.vocab = kVocab;
    o.seed = 7;
    o.init_std = 0.2f;
    o.config_overrides = overrides.is_null() ? json::object() : overrides;
    return o;
  }

  // Family-specific weight changes applied to every model before `edit`.
  virtual void AdjustWeights(F32Map* weights) {}

  std::string CreateFrom(const std::string& name, const CreateModelOptions& options, const Edit& edit = nullptr) {
    const std::string dir = scratch_.Path(name);
    auto st = CreateModelDirectory(options, dir);
    if (!st.ok()) throw std::runtime_error("CreateModelDirectory(" + name + "): " + std::string(st.message()));
    F32Map weights = ReadWeights(dir);
    RandomizeVectors(&weights, options.seed);
    AdjustWeights(&weights);
    auto config = ReadJsonFile(JoinPath(dir, "config.json"));
    if (!config.ok()) throw std::runtime_error(std::string(config.status().message()));
    if (edit) edit(*config, weights);
    WriteWeights(dir, weights);
    auto written = WriteStringToFile(JoinPath(dir, "config.json"), config->dump(2));
    if (!written.ok()) throw std::runtime_error(std::string(written.message()));
    return dir;
  }

  // The engine against the port on `batch`: every tensor the port computes, within tolerance,
  // and logits exactly where the port has them. Returns the engine's outputs.
  EngineOutputs Check(const std::string& dir, const PaddedBatch& batch, const std::string& label) {
    const naive::Outputs want = RunNaive(dir, batch);
    EngineOutputs got = RunEngine(dir, batch);
    size_t engine_states = 0;
    for (const auto& [name, t] : got) engine_states += name.rfind("hidden_state_", 0) == 0 ? 1 : 0;
    size_t naive_states = 0;
    for (const auto& [name, t] : want) {
      naive_states += name.rfind("hidden_state_", 0) == 0 ? 1 : 0;
      auto it = got.find(name);
      EXPECT_NE(it, got.end()) << label << ": the engine gave no " << name;
      if (it == got.end()) continue;
      EXPECT_LE(Diff(it->second, naive::ToNamedTensor(name, t), batch), kTolerance) << label << ": " << name;
    }
    EXPECT_EQ(engine_states, naive_states) << label;
    EXPECT_EQ(got.count("logits"), want.count("logits")) << label;
    return got;
  }

  // Check on the padded batch and on one unpadded row; returns the padded batch's outputs.
  EngineOutputs Check(const std::string& dir, const std::string& label) {
    Check(dir, unpadded_, label + " (unpadded)");
    return Check(dir, batch_, label);
  }

  ScratchDir scratch_;
  PaddedBatch batch_ = MakeBatch({70, 33, 17, 1}, kVocab, 11);
  PaddedBatch unpadded_ = MakeBatch({41}, kVocab, 12);
};

}  // namespace relserve::testing

#endif  // RELSERVE_TESTS_MODEL_SWITCH_TEST_SUPPORT_H_
