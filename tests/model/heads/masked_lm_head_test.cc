// SPLADE vectors from the masked-LM heads of *ForMaskedLM checkpoints (server/model/heads/masked_lm_head.h
// through Engine::Run), against the head written out here in double from the heads of
// transformers 4.40.2 (BertOnlyMLMHead, RobertaLMHead / XLMRobertaLMHead, ElectraForMaskedLM's
// generator_predictions + generator_lm_head, DebertaV2OnlyMLMHead, MPNetLMHead) and SPLADE's
// max pooling: v[j] = max over the sequence's tokens of log(1 + relu(logits[t, j])). The head's
// weights are read from the file by their transformers names, not through the descriptors; the
// token states are the engine's own last_hidden_state (proven against transformers by
// reference_parity_test and the switch tests).
#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/families/family_registry.h"
#include "server/model/heads/masked_lm_head.h"
#include "server/model/layers/weight_loader.h"
#include "tests/model/switch_test_support.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

using ::testing::HasSubstr;
using testing::F32Map;
using testing::F32Tensor;
using testing::ScratchDir;
using nlohmann::json;

constexpr double kTolerance = 1e-4;
constexpr int64_t kVocab = 128;
constexpr int64_t kHidden = 32;

// One family's *ForMaskedLM, with its head's tensors as transformers names them.
struct HeadCase {
  const char* label;
  const char* variant;       // relserve-model create --family
  const char* architecture;
  int embedding_size;        // 0: hidden
  const char* dense;         // nn.Linear hidden -> width
  const char* norm;          // nn.LayerNorm(width)
  const char* decoder;       // nn.Linear width -> vocab (weight), tied to `embeddings`
  const char* bias;          // [vocab]
  const char* embeddings;    // the word embeddings
  bool hidden_act;           // ACT2FN[config.hidden_act] (BERT, DeBERTa-v2); else gelu
};

const HeadCase kCases[] = {
    {"bert", "bert", "BertForMaskedLM", 0, "cls.predictions.transform.dense", "cls.predictions.transform.LayerNorm",
     "cls.predictions.decoder.weight", "cls.predictions.bias", "bert.embeddings.word_embeddings.weight", true},
    {"roberta", "roberta", "RobertaForMaskedLM", 0, "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder.weight",
     "lm_head.bias", "roberta.embeddings.word_embeddings.weight", false},
    {"xlm_roberta", "xlm-roberta", "XLMRobertaForMaskedLM", 0, "lm_head.dense", "lm_head.layer_norm",
     "lm_head.decoder.weight", "lm_head.bias", "roberta.embeddings.word_embeddings.weight", false},
    {"electra", "electra", "ElectraForMaskedLM", 16, "generator_predictions.dense", "generator_predictions.LayerNorm",
     "generator_lm_head.weight", "generator_lm_head.bias", "electra.embeddings.word_embeddings.weight", false},
    {"deberta", "deberta-v3", "DebertaV2ForMaskedLM", 16, "cls.predictions.transform.dense",
     "cls.predictions.transform.LayerNorm", "cls.predictions.decoder.weight", "cls.predictions.bias",
     "deberta.embeddings.word_embeddings.weight", true},
    {"mpnet", "mpnet", "MPNetForMaskedLM", 0, "lm_head.dense", "lm_head.layer_norm", "lm_head.decoder.weight",
     "lm_head.bias", "mpnet.embeddings.word_embeddings.weight", false},
};

// relu as the backbone's and (where it follows hidden_act) the head's activation, so that a head
// that took gelu where transformers takes hidden_act, or the reverse, is far off; a large
// layer_norm_eps, so that an eps left at its default (ELECTRA before transformers 4.17) shows.
json Overrides(const HeadCase& c) {
  return {{"architectures", {c.architecture}}, {"hidden_act", "relu"}, {"layer_norm_eps", 0.1}};
}

// The head of transformers, in double, read from the weights by name.
struct ReferenceHead {
  std::vector<double> dense_w, dense_b, norm_w, norm_b, decoder, bias;
  int64_t width = 0;
  double eps = 0;
  std::string activation;

  static ReferenceHead Read(const F32Map& w, const HeadCase& c, double eps, const std::string& activation,
                            const std::string& decoder_name) {
    auto get = [&](const std::string& name) {
      auto it = w.find(name);
      if (it == w.end()) throw std::runtime_error("no tensor " + name);
      return std::vector<double>(it->second.data.begin(), it->second.data.end());
    };
    ReferenceHead h;
    h.dense_w = get(std::string(c.dense) + ".weight");
    h.dense_b = get(std::string(c.dense) + ".bias");
    h.norm_w = get(std::string(c.norm) + ".weight");
    h.norm_b = get(std::string(c.norm) + ".bias");
    h.decoder = get(decoder_name);
    h.bias = get(c.bias);
    h.width = static_cast<int64_t>(h.dense_b.size());
    h.eps = eps;
    h.activation = activation;
    return h;
  }

  // logits of one token state [hidden]: decoder(LayerNorm(act(dense(h)))) + bias.
  std::vector<double> Logits(const float* state) const {
    const int64_t W = width, H = static_cast<int64_t>(dense_w.size()) / W;
    std::vector<double> x(W);
    for (int64_t i = 0; i < W; ++i) {
      double s = dense_b[i];
      for (int64_t k = 0; k < H; ++k) s += dense_w[i * H + k] * state[k];
      x[i] = naive::Activation(activation, s);
    }
    double mean = 0, var = 0;
    for (double v : x) mean += v;
    mean /= W;
    for (double v : x) var += (v - mean) * (v - mean);
    var /= W;
    for (int64_t i = 0; i < W; ++i) x[i] = (x[i] - mean) / std::sqrt(var + eps) * norm_w[i] + norm_b[i];
    std::vector<double> logits(bias.size());
    for (size_t j = 0; j < bias.size(); ++j) {
      double s = bias[j];
      for (int64_t i = 0; i < W; ++i) s += decoder[j * W + i] * x[i];
      logits[j] = s;
    }
    return logits;
  }

  // SPLADE over `n` token states [n, hidden] (row-major).
  // sentence-transformers' SpladePooling: log1p(relu(logit)) (twice log1p with log1p_relu) of
  // every token, then their maximum or their sum.
  std::vector<double> Splade(const float* states, int64_t n, int64_t hidden, bool sum = false,
                             bool log1p_relu = false) const {
    std::vector<double> v(bias.size(), 0.0);
    for (int64_t t = 0; t < n; ++t) {
      const std::vector<double> logits = Logits(states + t * hidden);
      for (size_t j = 0; j < v.size(); ++j) {
        double x = std::log1p(std::max(0.0, logits[j]));
        if (log1p_relu) x = std::log1p(x);
        v[j] = sum ? v[j] + x : std::max(v[j], x);
      }
    }
    return v;
  }
};

std::vector<SequenceInput> Sequences(const std::vector<int>& lengths, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int32_t> id(3, kVocab - 1);
  std::vector<SequenceInput> batch;
  for (int n : lengths) {
    SequenceInput s;
    for (int t = 0; t < n; ++t) s.input_ids.push_back(id(rng));
    batch.push_back(std::move(s));
  }
  return batch;
}

// A sparse vector as a dense one, checking the order and the weights on the way.
std::vector<double> Dense(const std::vector<std::pair<int32_t, float>>& sparse, int64_t vocab) {
  std::vector<double> v(vocab, 0.0);
  int32_t last = -1;
  for (const auto& [id, w] : sparse) {
    EXPECT_GT(id, last) << "ids must ascend";
    EXPECT_GT(w, 0.0f) << "id " << id;
    EXPECT_LT(id, vocab);
    if (id >= 0 && id < vocab) v[id] = w;
    last = id;
  }
  return v;
}

std::unique_ptr<Engine> LoadEngine(const std::string& dir) {
  auto engine = Engine::Load(dir, testing::TestEngineOptions());
  if (!engine.ok()) throw std::runtime_error("Engine::Load: " + std::string(engine.status().message()));
  return std::move(*engine);
}

std::vector<SequenceOutput> RunEngine(Engine& engine, const std::vector<SequenceInput>& batch, uint32_t outputs) {
  auto out = engine.Run(batch, outputs);
  if (!out.ok()) throw std::runtime_error("Run: " + std::string(out.status().message()));
  return std::move(*out);
}

class MaskedLmHeadTest : public ::testing::Test {
 protected:
  static CreateModelOptions Options(const HeadCase& c, const json& overrides) {
    CreateModelOptions o;
    o.family = c.variant;
    o.hidden = kHidden;
    o.layers = 2;
    o.heads = 4;
    o.intermediate = 64;
    o.vocab = kVocab;
    o.embedding_size = c.embedding_size;
    o.seed = 7;
    o.init_std = 0.2f;
    o.config_overrides = overrides;
    return o;
  }

  // A created model with random biases and norm weights, then `edit`ed.
  std::string Create(const std::string& name, const HeadCase& c, const json& overrides,
                     const std::function<void(json&, F32Map&)>& edit = nullptr) {
    const std::string dir = scratch_.Path(name);
    auto st = CreateModelDirectory(Options(c, overrides), dir);
    if (!st.ok()) throw std::runtime_error("CreateModelDirectory(" + name + "): " + std::string(st.message()));
    F32Map weights = testing::ReadWeights(dir);
    testing::RandomizeVectors(&weights, 7);
    auto config = ReadJsonFile(JoinPath(dir, "config.json"));
    if (!config.ok()) throw std::runtime_error(std::string(config.status().message()));
    if (edit) edit(*config, weights);
    testing::WriteWeights(dir, weights);
    auto written = WriteStringToFile(JoinPath(dir, "config.json"), config->dump(2));
    if (!written.ok()) throw std::runtime_error(std::string(written.message()));
    return dir;
  }

  static ReferenceHead Reference(const std::string& dir, const HeadCase& c, const std::string& decoder_name) {
    auto config = ReadJsonFile(JoinPath(dir, "config.json"));
    if (!config.ok()) throw std::runtime_error(std::string(config.status().message()));
    const std::string act = c.hidden_act ? (*config)["hidden_act"].get<std::string>() : "gelu";
    return ReferenceHead::Read(testing::ReadWeights(dir), c, (*config)["layer_norm_eps"].get<double>(), act,
                               decoder_name);
  }

  // The engine's SPLADE vectors on `batch` against `want` computed from its own token states;
  // returns the largest difference.
  static double Compare(Engine& engine, const std::vector<SequenceInput>& batch, const ReferenceHead& want,
                        const std::string& label) {
    const auto out = RunEngine(engine, batch, kOutputTokenStates | kOutputSparse);
    double worst = 0;
    size_t zeros = 0, nonzeros = 0;
    for (size_t b = 0; b < batch.size(); ++b) {
      const std::vector<double> expected =
          want.Splade(out[b].token_states.data(), out[b].num_tokens, engine.info().hidden_size);
      for (double v : expected) (v > 0 ? nonzeros : zeros) += 1;
      const double d = MaxAbsDiff(Dense(out[b].sparse, kVocab), expected);
      EXPECT_LE(d, kTolerance) << label << ", sequence " << b;
      worst = std::max(worst, d);
    }
    // Both kinds of entry occur, so that the listing of only positive weights is tested.
    EXPECT_GT(zeros, 0u) << label;
    EXPECT_GT(nonzeros, 0u) << label;
    return worst;
  }

  ScratchDir scratch_;
  const std::vector<SequenceInput> batch_ = Sequences({13, 40, 1, 7}, 11);
};

TEST_F(MaskedLmHeadTest, SpladeOfEveryFamilyMatchesTheHeadInDouble) {
  for (const HeadCase& c : kCases) {
    SCOPED_TRACE(c.label);
    const std::string dir = Create(c.label, c, Overrides(c));
    auto engine = LoadEngine(dir);
    EXPECT_EQ(engine->info().sparse_kind, "splade");
    EXPECT_EQ(engine->info().multi_vector_kind, "");
    EXPECT_THAT(engine->heads_description(), HasSubstr("splade"));
    const ReferenceHead want = Reference(dir, c, c.embeddings);  // tied: the word embeddings
    const double worst = Compare(*engine, batch_, want, c.label);
    std::cout << c.label << ": SPLADE vs double reference, max |diff| " << worst << "\n";

    // The head where transformers' other choice of activation would have it is far off: the
    // test sees which activation the head uses.
    ReferenceHead other = want;
    other.activation = c.hidden_act ? "gelu" : "relu";
    const auto out = RunEngine(*engine, batch_, kOutputTokenStates | kOutputSparse);
    EXPECT_GT(MaxAbsDiff(Dense(out[1].sparse, kVocab), other.Splade(out[1].token_states.data(), out[1].num_tokens, kHidden)),
              100 * kTolerance);

    // Each sequence alone gives what it gets in the padded batch.
    for (size_t b = 0; b < batch_.size(); ++b) {
      const auto alone = RunEngine(*engine, {batch_[b]}, kOutputSparse);
      EXPECT_LE(MaxAbsDiff(Dense(alone[0].sparse, kVocab), Dense(out[b].sparse, kVocab)), 1e-5) << "sequence " << b;
    }

    // The pooled embedding is the backbone's, as the same checkpoint read as *Model gives it.
    const auto pooled = RunEngine(*engine, batch_, kOutputPooled);
    auto config = ReadJsonFile(JoinPath(dir, "config.json"));
    ASSERT_TRUE(config.ok());
    std::string base = c.architecture;
    base.replace(base.find("ForMaskedLM"), std::string("ForMaskedLM").size(), "Model");
    (*config)["architectures"] = {base};
    ASSERT_TRUE(WriteStringToFile(JoinPath(dir, "config.json"), config->dump(2)).ok());
    auto as_model = LoadEngine(dir);
    EXPECT_EQ(as_model->info().sparse_kind, "");
    const auto model_pooled = RunEngine(*as_model, batch_, kOutputPooled);
    for (size_t b = 0; b < batch_.size(); ++b) {
      EXPECT_EQ(pooled[b].pooled, model_pooled[b].pooled) << base << ", sequence " << b;
    }
  }
}

// A sentence-transformers SparseEncoder directory (MLMTransformer, SpladePooling) loads, its
// dense embedding is the mean of the token states (it has no Pooling module), and its sparse
// vector follows SpladePooling's pooling_strategy and activation_function.
TEST_F(MaskedLmHeadTest, SparseEncoderModulesChooseTheSpladePooling) {
  const HeadCase& c = kCases[0];  // bert
  const std::string dir = Create("sparse_encoder", c, Overrides(c));
  ASSERT_TRUE(WriteStringToFile(JoinPath(dir, "modules.json"),
                                R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.sparse_encoder.)"
                                R"(models.MLMTransformer"}, {"idx": 1, "name": "1", "path": "1_SpladePooling", "type": )"
                                R"("sentence_transformers.sparse_encoder.models.SpladePooling"}])")
                  .ok());
  ASSERT_EQ(mkdir(JoinPath(dir, "1_SpladePooling").c_str(), 0755), 0);
  const ReferenceHead want = Reference(dir, c, c.embeddings);
  for (const bool sum : {false, true}) {
    for (const bool log1p_relu : {false, true}) {
      const json pooling{{"pooling_strategy", sum ? "sum" : "max"},
                         {"activation_function", log1p_relu ? "log1p_relu" : "relu"},
                         {"word_embedding_dimension", kVocab}};
      ASSERT_TRUE(WriteStringToFile(JoinPath(dir, "1_SpladePooling/config.json"), pooling.dump()).ok());
      auto engine = LoadEngine(dir);
      EXPECT_EQ(engine->info().sparse_kind, "splade");
      EXPECT_EQ(engine->info().pooling.Describe(), "mean");
      const auto out = RunEngine(*engine, batch_, kOutputTokenStates | kOutputSparse | kOutputPooled);
      for (size_t b = 0; b < batch_.size(); ++b) {
        const std::vector<double> expected =
            want.Splade(out[b].token_states.data(), out[b].num_tokens, kHidden, sum, log1p_relu);
        EXPECT_LE(MaxAbsDiff(Dense(out[b].sparse, kVocab), expected), kTolerance * (sum ? out[b].num_tokens : 1))
            << "sum " << sum << " log1p_relu " << log1p_relu << ", sequence " << b;
        std::vector<double> mean(kHidden, 0.0);
        for (int t = 0; t < out[b].num_tokens; ++t) {
          for (int k = 0; k < kHidden; ++k) mean[k] += out[b].token_states[t * kHidden + k] / out[b].num_tokens;
        }
        EXPECT_LE(MaxAbsDiff(std::vector<double>(out[b].pooled.begin(), out[b].pooled.end()), mean), 1e-5)
            << "sequence " << b;
      }
    }
  }
}

// The decoder: the word embeddings when tied and absent from the file; the file's own decoder
// weight when present (pytorch_model.bin files of the time kept the tied copy), or when
// tie_word_embeddings is false. The bias may be saved under the decoder.bias alias only.
TEST_F(MaskedLmHeadTest, DecoderTiedUntiedAndSavedWeights) {
  const HeadCase& bert = kCases[0];
  const HeadCase& electra = kCases[3];
  for (const HeadCase* c : {&bert, &electra}) {
    SCOPED_TRACE(c->label);
    json untied = Overrides(*c);
    untied["tie_word_embeddings"] = false;
    const std::string untied_dir = Create(std::string(c->label) + "_untied", *c, untied);
    ASSERT_TRUE(testing::ReadWeights(untied_dir).count(c->decoder));  // the creator wrote it
    auto engine = LoadEngine(untied_dir);
    EXPECT_THAT(engine->heads_description(), HasSubstr(c->decoder));
    Compare(*engine, batch_, Reference(untied_dir, *c, c->decoder), "untied");
    // ... and not the word embeddings, which a wrong tie would have used.
    const auto out = RunEngine(*engine, batch_, kOutputTokenStates | kOutputSparse);
    EXPECT_GT(MaxAbsDiff(Dense(out[0].sparse, kVocab), Reference(untied_dir, *c, c->embeddings)
                                                          .Splade(out[0].token_states.data(), out[0].num_tokens, kHidden)),
              100 * kTolerance);

    // Tied, but the file holds a decoder weight of its own.
    const std::string saved_dir = Create(std::string(c->label) + "_saved_decoder", *c, Overrides(*c), [&](json&, F32Map& w) {
      F32Tensor decoder = w.at(c->embeddings);
      for (float& v : decoder.data) v = -v * 1.5f + 0.05f;
      w[c->decoder] = decoder;
    });
    engine = LoadEngine(saved_dir);
    Compare(*engine, batch_, Reference(saved_dir, *c, c->decoder), "tied with a saved decoder weight");
  }
  // BERT's bias under cls.predictions.decoder.bias only.
  const std::string alias_dir = Create("bert_bias_alias", bert, Overrides(bert), [](json&, F32Map& w) {
    w["cls.predictions.decoder.bias"] = w.at("cls.predictions.bias");
    w.erase("cls.predictions.bias");
  });
  auto engine = LoadEngine(alias_dir);
  HeadCase alias = bert;
  alias.bias = "cls.predictions.decoder.bias";
  Compare(*engine, batch_, Reference(alias_dir, alias, bert.embeddings), "bias alias");
}

// A *ForMaskedLM checkpoint without its head serves embeddings and refuses sparse output; one
// with part of a head, or a misshaped one, does not load.
TEST_F(MaskedLmHeadTest, MissingAndMalformedHeads) {
  const HeadCase& bert = kCases[0];
  auto drop_head = [](json&, F32Map& w) {
    for (auto it = w.begin(); it != w.end();) it = it->first.rfind("cls.", 0) == 0 ? w.erase(it) : std::next(it);
  };
  const std::string headless = Create("headless", bert, Overrides(bert), drop_head);
  auto engine = LoadEngine(headless);
  EXPECT_EQ(engine->info().sparse_kind, "");
  EXPECT_EQ(engine->info().architecture, "BertForMaskedLM");
  auto refused = engine->Run(batch_, kOutputPooled | kOutputSparse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("BertForMaskedLM"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("masked-LM head"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("cls.predictions.transform.dense.weight"));
  EXPECT_TRUE(engine->Run(batch_, kOutputPooled).ok());
  refused = engine->Run(batch_, kOutputMultiVector);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("colbert_linear.pt"));

  // A model that is not *ForMaskedLM says so.
  const std::string plain = Create("plain", bert, {{"architectures", {"BertModel"}}});
  auto plain_engine = LoadEngine(plain);
  refused = plain_engine->Run(batch_, kOutputSparse);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("BertModel"));
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("sparse_linear.pt"));

  struct Broken {
    const char* name;
    std::function<void(json&, F32Map&)> edit;
    const char* tensor;
  };
  const Broken broken[] = {
      {"no_norm_bias", [](json&, F32Map& w) { w.erase("cls.predictions.transform.LayerNorm.bias"); },
       "cls.predictions.transform.LayerNorm.bias"},
      {"no_bias", [](json&, F32Map& w) { w.erase("cls.predictions.bias"); }, "cls.predictions.bias"},
      {"dense_shape",
       [](json&, F32Map& w) { w["cls.predictions.transform.dense.weight"] = F32Tensor{{kHidden, 16}, std::vector<float>(kHidden * 16)}; },
       "cls.predictions.transform.dense.weight"},
      {"decoder_shape",
       [](json&, F32Map& w) { w["cls.predictions.decoder.weight"] = F32Tensor{{kVocab - 1, kHidden}, std::vector<float>((kVocab - 1) * kHidden)}; },
       "cls.predictions.decoder.weight"},
      {"untied_without_decoder", [](json& c, F32Map&) { c["tie_word_embeddings"] = false; },
       "cls.predictions.decoder.weight"},
  };
  for (const Broken& b : broken) {
    const std::string dir = Create(b.name, bert, Overrides(bert), b.edit);
    const absl::Status status = Engine::Load(dir, testing::TestEngineOptions()).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument) << b.name << ": " << status;
    EXPECT_THAT(std::string(status.message()), HasSubstr(JoinPath(dir, "model.safetensors"))) << b.name;
    EXPECT_THAT(std::string(status.message()), HasSubstr(b.tensor)) << b.name;
  }
}

// MaskedLmHead::Splade computes the logits a chunk of tokens at a time; sequences that straddle
// chunks, and chunks that hold several sequences, give what one chunk gives and what the head
// in double gives.
TEST_F(MaskedLmHeadTest, ChunkedMaximumOverPackedSequences) {
  const HeadCase& c = kCases[1];  // roberta
  const std::string dir = Create("chunks", c, Overrides(c));
  auto config = LoadModelConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  const std::optional<MaskedLmHeadLayout> layout = config->family->MaskedLmHead(*config);
  ASSERT_TRUE(layout.has_value());
  auto checkpoint = SafetensorsCheckpoint::OpenDirectory(dir);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  WeightLoader weights(**checkpoint, at::kFloat);
  ASSERT_TRUE(MaskedLmHead::Present(weights, *layout));
  auto head = MaskedLmHead::Load(weights, *layout, at::Tensor());  // tied: read by name
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_TRUE(head->decoder_is_word_embeddings());
  EXPECT_EQ(head->vocab_size(), kVocab);

  const std::vector<int64_t> lengths = {5, 1, 9, 2, 4};
  const at::Tensor tokens = at::randn({21, kHidden}, at::TensorOptions().dtype(at::kFloat)) * 2;
  const ReferenceHead want = Reference(dir, c, c.embeddings);
  const auto whole = head->Splade(tokens, lengths);
  ASSERT_EQ(whole.size(), lengths.size());
  for (int64_t rows : {1, 3, 4, 8, 21, 64}) {
    const auto chunked = head->Splade(tokens, lengths, rows);
    ASSERT_EQ(chunked.size(), lengths.size());
    int64_t first = 0;
    for (size_t b = 0; b < lengths.size(); ++b) {
      EXPECT_LE(MaxAbsDiff(Dense(chunked[b], kVocab), Dense(whole[b], kVocab)), 1e-6) << rows << " rows, sequence " << b;
      const std::vector<double> expected = want.Splade(tokens.data_ptr<float>() + first * kHidden, lengths[b], kHidden);
      EXPECT_LE(MaxAbsDiff(Dense(chunked[b], kVocab), expected), kTolerance) << rows << " rows, sequence " << b;
      first += lengths[b];
    }
  }
  // SpladePooling's other settings, chunked the same way.
  for (const bool sum : {false, true}) {
    for (const bool log1p_relu : {false, true}) {
      MaskedLmHead::Pooling pooling;
      pooling.sum = sum;
      pooling.log1p_relu = log1p_relu;
      for (int64_t rows : {3, 64}) {
        const auto got = head->Splade(tokens, lengths, pooling, rows);
        int64_t first = 0;
        for (size_t b = 0; b < lengths.size(); ++b) {
          const std::vector<double> expected =
              want.Splade(tokens.data_ptr<float>() + first * kHidden, lengths[b], kHidden, sum, log1p_relu);
          EXPECT_LE(MaxAbsDiff(Dense(got[b], kVocab), expected), kTolerance * (sum ? lengths[b] : 1))
              << "sum " << sum << " log1p_relu " << log1p_relu << ", " << rows << " rows, sequence " << b;
          first += lengths[b];
        }
      }
    }
  }
  // The logits themselves, as the *ForMaskedLM class returns them.
  const at::Tensor logits = head->Logits(tokens.narrow(0, 0, 1));
  const std::vector<double> expected = want.Logits(tokens.data_ptr<float>());
  double d = 0;
  for (int64_t j = 0; j < kVocab; ++j) d = std::max(d, testing::AbsDiff(logits[0][j].item<double>(), expected[j]));
  EXPECT_LE(d, kTolerance);
}

}  // namespace
}  // namespace relserve
