// Engine behaviour beyond the reference numbers: padding invariance, the serving path (Run)
// against the padded forward, half-precision and sharded checkpoints, bf16 inference, and a
// precise error for every kind of broken model directory.
#include <cmath>
#include <cstring>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/model/engine.h"
#include "server/model/kernels/packed_gemm.h"
#include "server/model/layers/packed_linear.h"
#include "tests/model/model_dir_builder.h"
#include "tests/model/reference_fixture.h"
#include "tests/testing/max_abs_diff.h"

namespace relserve {
namespace {

using testing::ReferenceSequences;
using testing::Cosine;

using testing::MaxAbsDiff;

using ::testing::HasSubstr;
using testing::ModelDirBuilder;
using testing::ReadReferenceInputs;
using testing::ReferenceDir;

std::unique_ptr<Engine> LoadOrDie(const std::string& dir, EngineOptions options = {}) {
  auto engine = Engine::Load(dir, options);
  EXPECT_TRUE(engine.ok()) << engine.status();
  return engine.ok() ? std::move(*engine) : nullptr;
}

class PaddingInvarianceTest : public ::testing::TestWithParam<std::string> {};

// A sequence's outputs do not depend on the batch it is in or the padding it gets.
TEST_P(PaddingInvarianceTest, AloneTogetherAndOverPadded) {
  auto engine = LoadOrDie(ReferenceDir(GetParam()));
  ASSERT_NE(engine, nullptr);
  const uint32_t outputs = kOutputTokenStates | kOutputPooled | (engine->info().labels.empty() ? 0u : static_cast<uint32_t>(kOutputLogits));
  std::vector<SequenceInput> seqs = ReferenceSequences(GetParam());
  auto together = engine->Run(seqs, outputs);
  ASSERT_TRUE(together.ok()) << together.status();
  // Reversed order, and a long companion forcing extra padding on every other sequence.
  std::vector<SequenceInput> reversed(seqs.rbegin(), seqs.rend());
  SequenceInput filler = seqs[0];
  filler.input_ids.resize(filler.input_ids.size() + 23, 7);
  reversed.push_back(filler);
  auto shuffled = engine->Run(reversed, outputs);
  ASSERT_TRUE(shuffled.ok()) << shuffled.status();
  for (size_t i = 0; i < seqs.size(); ++i) {
    auto alone = engine->Run({seqs[i]}, outputs);
    ASSERT_TRUE(alone.ok()) << alone.status();
    const SequenceOutput& a = (*alone)[0];
    for (const SequenceOutput* other : {&(*together)[i], &(*shuffled)[seqs.size() - 1 - i]}) {
      EXPECT_EQ(other->num_tokens, a.num_tokens);
      EXPECT_LE(MaxAbsDiff(other->token_states, a.token_states), 1e-5) << "sequence " << i;
      EXPECT_LE(MaxAbsDiff(other->pooled, a.pooled), 1e-5) << "sequence " << i;
      EXPECT_LE(MaxAbsDiff(other->logits, a.logits), 1e-5) << "sequence " << i;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ReferenceModels, PaddingInvarianceTest,
                         ::testing::Values("deberta_v3_like", "deberta_v3_cls", "t5_v1_0"));

// Run (serving path, right-padded internally) equals transformers' padded forward.
TEST(EngineTest, RunMatchesPaddedForward) {
  const std::string dir = ReferenceDir("deberta_v3_cls");
  auto engine = LoadOrDie(dir);
  ASSERT_NE(engine, nullptr);
  PaddedBatch batch = ReadReferenceInputs(dir + "/inputs.json");
  auto padded = engine->ForwardPadded(batch, false);
  ASSERT_TRUE(padded.ok()) << padded.status();
  auto run = engine->Run(ReferenceSequences("deberta_v3_cls"), kOutputTokenStates | kOutputLogits | kOutputPooled);
  ASSERT_TRUE(run.ok()) << run.status();
  const NamedTensor* last = nullptr;
  const NamedTensor* logits = nullptr;
  for (const NamedTensor& t : *padded) {
    if (t.name == "last_hidden_state") last = &t;
    if (t.name == "logits") logits = &t;
  }
  ASSERT_NE(last, nullptr);
  ASSERT_NE(logits, nullptr);
  const int64_t H = last->shape[2];
  for (int64_t b = 0; b < batch.batch; ++b) {
    const SequenceOutput& r = (*run)[b];
    std::vector<float> want(last->data.begin() + b * batch.length * H,
                            last->data.begin() + (b * batch.length + r.num_tokens) * H);
    EXPECT_LE(MaxAbsDiff(r.token_states, want), 1e-5);
    std::vector<float> want_logits(logits->data.begin() + b * 3, logits->data.begin() + b * 3 + 3);
    EXPECT_LE(MaxAbsDiff(r.logits, want_logits), 1e-5);
    // Default pooling without sentence-transformers files is the mean of the token states.
    for (int64_t h = 0; h < H; ++h) {
      double mean = 0;
      for (int t = 0; t < r.num_tokens; ++t) mean += want[t * H + h];
      EXPECT_NEAR(r.pooled[h], mean / r.num_tokens, 1e-5);
    }
  }
  EXPECT_EQ(engine->info().labels, (std::vector<std::string>{"LABEL_0", "LABEL_1", "LABEL_2"}));
  EXPECT_EQ(engine->info().problem_type, ProblemType::kSingleLabel);
  EXPECT_FALSE(engine->info().has_tokenizer);
  auto loaded = LoadModel(dir, EngineOptions{});
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(loaded->tokenizer, nullptr);
  EXPECT_FALSE(loaded->engine->info().has_tokenizer);
}

// RunTimed gives Run's outputs and where the call's time went: every stage measured, together
// no longer than the call.
TEST(EngineTest, RunTimedSaysWhereTheTimeWent) {
  const std::string dir = ReferenceDir("deberta_v3_cls");
  auto engine = LoadOrDie(dir);
  ASSERT_NE(engine, nullptr);
  const std::vector<SequenceInput> batch = ReferenceSequences("deberta_v3_cls");
  auto plain = engine->Run(batch, kOutputPooled | kOutputLogits);
  ASSERT_TRUE(plain.ok()) << plain.status();
  RunTimings timings;
  timings.forward = absl::Hours(1);  // overwritten
  const absl::Time start = absl::Now();
  auto timed = engine->RunTimed(batch, kOutputPooled | kOutputLogits, &timings);
  const absl::Duration call = absl::Now() - start;
  ASSERT_TRUE(timed.ok()) << timed.status();
  ASSERT_EQ(timed->size(), plain->size());
  for (size_t i = 0; i < plain->size(); ++i) {
    EXPECT_EQ((*timed)[i].pooled, (*plain)[i].pooled);
    EXPECT_EQ((*timed)[i].logits, (*plain)[i].logits);
  }
  EXPECT_GT(timings.prepare, absl::ZeroDuration());
  EXPECT_GT(timings.forward, absl::ZeroDuration());
  EXPECT_GT(timings.results, absl::ZeroDuration());
  EXPECT_LE(timings.prepare + timings.forward + timings.results, call);
  // A refused call measures nothing.
  timings.forward = absl::Hours(1);
  auto refused = engine->RunTimed(batch, kOutputSparse, &timings);
  EXPECT_FALSE(refused.ok());
  EXPECT_EQ(timings.forward, absl::ZeroDuration());
}

// Each stage holds its own work: the attention calls (timed inside the layers) are in the
// forward stage, and take longer than preparing the batch or reading its results; a stage
// measured in the wrong place, or two swapped, fails here.
TEST(EngineTest, StageTimesHoldTheirWork) {
  auto engine = LoadOrDie(ReferenceDir("deberta_v3_cls"));
  ASSERT_NE(engine, nullptr);
  std::vector<SequenceInput> batch(8);
  for (int i = 0; i < 8; ++i) {
    for (int t = 0; t < 256; ++t) batch[i].input_ids.push_back(5 + (7 * t + 3 * i) % 90);
  }
  ASSERT_TRUE(engine->Run(batch, kOutputPooled).ok());
  const Engine::AttentionCounts before = engine->attention_counts();
  RunTimings t;
  ASSERT_TRUE(engine->RunTimed(batch, kOutputPooled | kOutputLogits, &t).ok());
  const Engine::AttentionCounts after = engine->attention_counts();
  EXPECT_EQ(after.cpu - before.cpu, 3);  // one per layer, on the CPU's own path
  const absl::Duration attention = absl::Seconds(after.host_seconds - before.host_seconds);
  EXPECT_GT(attention, absl::ZeroDuration());
  EXPECT_LE(attention, t.forward);
  EXPECT_GT(attention, t.prepare);
  EXPECT_GT(attention, t.results);
}

// Every family's layers count their attention calls (EncoderPass::ForAttention), XLNet's too.
TEST(EngineTest, EveryFamilyCountsOneAttentionCallPerLayer) {
  for (const char* name : {"deberta_v3_like", "t5_v1_0", "bert_relative_key", "mpnet_like", "xlnet_like"}) {
    auto engine = LoadOrDie(ReferenceDir(name));
    ASSERT_NE(engine, nullptr) << name;
    const Engine::AttentionCounts before = engine->attention_counts();
    ASSERT_TRUE(engine->Run({{{5, 6, 7, 8, 9, 10}, {}}}, kOutputPooled).ok()) << name;
    const Engine::AttentionCounts after = engine->attention_counts();
    EXPECT_EQ(after.cpu - before.cpu, engine->info().num_layers) << name;
  }
}

// The paths tests choose are the engine's own options (EngineKernels), not process-wide
// switches: two engines loaded side by side, one taking the GPUs' biased path on the CPU, the
// other the CPU's own path with its portable softmax gathers, each keeps its choice while the
// other runs, and both give the same answers.
TEST(EngineTest, KernelChoicesArePerEngine) {
  const std::string dir = ReferenceDir("deberta_v3_cls");
  EngineOptions biased_options;
  biased_options.kernels.gpu_attention_on_cpu = true;
  biased_options.kernels.fused_attention = false;
  EngineOptions portable_options;
  portable_options.kernels.avx512_softmax = false;
  auto biased = LoadOrDie(dir, biased_options);
  auto portable = LoadOrDie(dir, portable_options);
  ASSERT_NE(biased, nullptr);
  ASSERT_NE(portable, nullptr);
  const std::vector<SequenceInput> batch = ReferenceSequences("deberta_v3_cls");
  for (int round = 0; round < 2; ++round) {
    auto a = biased->Run(batch, kOutputPooled | kOutputLogits);
    auto b = portable->Run(batch, kOutputPooled | kOutputLogits);
    ASSERT_TRUE(a.ok()) << a.status();
    ASSERT_TRUE(b.ok()) << b.status();
    for (size_t i = 0; i < batch.size(); ++i) {
      EXPECT_LE(MaxAbsDiff((*a)[i].pooled, (*b)[i].pooled), 1e-4) << "sequence " << i;
      EXPECT_LE(MaxAbsDiff((*a)[i].logits, (*b)[i].logits), 1e-4) << "sequence " << i;
    }
  }
  const Engine::AttentionCounts on_bias = biased->attention_counts(), on_cpu = portable->attention_counts();
  EXPECT_EQ(on_bias.bias, 6);  // three layers, two rounds
  EXPECT_EQ(on_bias.cpu, 0);
  EXPECT_EQ(on_cpu.cpu, 6);
  EXPECT_EQ(on_cpu.bias, 0);
}

// float32's packed GEMM takes batches up to a bound: by default its tiles' (192 tokens for
// AVX-512's, every batch for AVX2's), else the engine's option; ModelInfo says which. Nothing is
// packed with --float32-gemm blas or under another dtype's projections.
TEST(EngineTest, InfoNamesThePackedGemmsBound) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  const std::string dir = ReferenceDir("t5_v1_0");
  auto by_default = LoadOrDie(dir);
  ASSERT_NE(by_default, nullptr);
  EXPECT_EQ(by_default->info().packed_float32_max_tokens, DefaultPackedLinearMaxRows(PackedWeights::Best()));
  EngineOptions bounded;
  bounded.kernels.packed_gemm_max_rows = 5;
  auto five = LoadOrDie(dir, bounded);
  ASSERT_NE(five, nullptr);
  EXPECT_EQ(five->info().packed_float32_max_tokens, 5);
  EngineOptions blas;
  blas.kernels.packed_float32_gemm = false;
  auto none = LoadOrDie(dir, blas);
  ASSERT_NE(none, nullptr);
  EXPECT_EQ(none->info().packed_float32_max_tokens, 0);
  // A batch past any bound gives the same answers on the packed GEMM as on OpenBLAS.
  std::vector<SequenceInput> batch = ReferenceSequences("t5_v1_0");
  for (int copy = 0; copy < 3; ++copy) {
    std::vector<SequenceInput> more = ReferenceSequences("t5_v1_0");
    batch.insert(batch.end(), more.begin(), more.end());
  }
  auto packed = five->Run(batch, kOutputPooled);
  auto every = by_default->Run(batch, kOutputPooled);
  auto loaded = none->Run(batch, kOutputPooled);
  ASSERT_TRUE(packed.ok() && every.ok() && loaded.ok());
  for (size_t i = 0; i < batch.size(); ++i) {
    EXPECT_LE(MaxAbsDiff((*every)[i].pooled, (*loaded)[i].pooled), 1e-4) << i;
    EXPECT_LE(MaxAbsDiff((*packed)[i].pooled, (*loaded)[i].pooled), 1e-4) << i;
  }
}

// Batch sizes rounded (as on a GPU, here asked for on the CPU): a batch of five runs as six, the
// sixth row holding one padding token; the five answers are those of the batch run as it is.
TEST(EngineTest, RoundedBatchSizesGiveTheSameAnswers) {
  const std::string dir = ReferenceDir("deberta_v3_cls");
  auto exact = LoadOrDie(dir);
  EngineOptions options;
  options.batch_rounding = BatchRounding::kRounded;
  auto rounded = LoadOrDie(dir, options);
  ASSERT_NE(exact, nullptr);
  ASSERT_NE(rounded, nullptr);
  std::vector<SequenceInput> batch(5);
  for (int i = 0; i < 5; ++i) {
    for (int t = 0; t < 10 + 3 * i; ++t) batch[i].input_ids.push_back(5 + (11 * t + 7 * i) % 90);
  }
  const uint32_t outputs = kOutputTokenStates | kOutputPooled | kOutputLogits;
  auto want = exact->Run(batch, outputs);
  auto got = rounded->Run(batch, outputs);
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_EQ(got->size(), 5u);
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ((*got)[i].num_tokens, (*want)[i].num_tokens);
    EXPECT_LE(MaxAbsDiff((*got)[i].token_states, (*want)[i].token_states), 1e-5) << i;
    EXPECT_LE(MaxAbsDiff((*got)[i].pooled, (*want)[i].pooled), 1e-5) << i;
    EXPECT_LE(MaxAbsDiff((*got)[i].logits, (*want)[i].logits), 1e-5) << i;
  }
  EXPECT_EQ(rounded->WarmUpBatchSizes(64), (std::vector<int>{1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64}));
  EXPECT_EQ(exact->WarmUpBatchSizes(64), (std::vector<int>{2}));
  EXPECT_FALSE(exact->WarmsUpPerThread());  // the CPU keeps no per-thread caches worth warming
}

// SequenceInput.pooling_skip (a prompt left out, sentence-transformers' include_prompt false):
// every mode but cls pools over the tokens after the skipped ones, as sentence-transformers'
// Pooling does with those tokens' attention mask zeroed; other rows of the batch are untouched.
TEST(EngineTest, PoolingSkipLeavesLeadingTokensOutOfEveryModeButCls) {
  std::vector<SequenceInput> seqs = ReferenceSequences("deberta_v3_like");
  ASSERT_GE(seqs.size(), 2u);
  ASSERT_GT(seqs[0].input_ids.size(), 4u);
  const int skip = 3;
  for (const char* mode : {"mean", "max", "cls", "lasttoken", "weightedmean", "mean_sqrt_len"}) {
    EngineOptions options;
    options.pooling = mode;
    auto engine = LoadOrDie(ReferenceDir("deberta_v3_like"), options);
    ASSERT_NE(engine, nullptr);
    auto plain = engine->Run(seqs, kOutputPooled);
    ASSERT_TRUE(plain.ok()) << plain.status();
    std::vector<SequenceInput> skipping = seqs;
    skipping[0].pooling_skip = skip;
    auto run = engine->Run(skipping, kOutputPooled | kOutputTokenStates);
    ASSERT_TRUE(run.ok()) << run.status();
    const SequenceOutput& r = (*run)[0];
    const int n = r.num_tokens;
    const int H = static_cast<int>(r.token_states.size()) / n;
    std::vector<float> want(H);
    for (int h = 0; h < H; ++h) {
      auto state = [&](int t) { return double(r.token_states[t * H + h]); };
      double sum = 0, weighted = 0, weights = 0, max = -1e30;
      for (int t = skip; t < n; ++t) {
        sum += state(t);
        weighted += (t + 1) * state(t);
        weights += t + 1;
        max = std::max(max, state(t));
      }
      const std::string m = mode;
      want[h] = static_cast<float>(m == "mean"           ? sum / (n - skip)
                                   : m == "max"          ? max
                                   : m == "cls"          ? state(0)
                                   : m == "lasttoken"    ? state(n - 1)
                                   : m == "weightedmean" ? weighted / weights
                                                         : sum / std::sqrt(double(n - skip)));
    }
    EXPECT_LE(MaxAbsDiff(r.pooled, want), 1e-5) << mode;
    if (std::string(mode) != "cls" && std::string(mode) != "lasttoken") {
      EXPECT_GT(MaxAbsDiff(r.pooled, (*plain)[0].pooled), 1e-4) << mode;
    }
    for (size_t i = 1; i < seqs.size(); ++i) EXPECT_LE(MaxAbsDiff((*run)[i].pooled, (*plain)[i].pooled), 1e-6) << mode;
  }
}

TEST(EngineTest, LogitsFromABackboneAreAFailedPrecondition) {
  auto engine = LoadOrDie(ReferenceDir("deberta_v3_like"));
  ASSERT_NE(engine, nullptr);
  auto r = engine->Run(ReferenceSequences("deberta_v3_like"), kOutputLogits);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("no classification head"));
}

TEST(EngineTest, ValidateNamesTheProblem) {
  auto engine = LoadOrDie(ReferenceDir("deberta_v3_like"));
  ASSERT_NE(engine, nullptr);
  EXPECT_TRUE(engine->Validate({{1, 5, 2}, {}}).ok());
  auto empty = engine->Validate({{}, {}});
  EXPECT_EQ(empty.code(), absl::StatusCode::kInvalidArgument);
  auto oov = engine->Validate({{1, 1000, 2}, {}});
  EXPECT_EQ(oov.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(oov.message()), HasSubstr("input_ids[1] = 1000"));
  auto negative = engine->Validate({{1, -4, 2}, {}});
  EXPECT_EQ(negative.code(), absl::StatusCode::kInvalidArgument);
  // type_vocab_size 0: transformers ignores token types (tokenizers still send 1s for pairs).
  EXPECT_TRUE(engine->Validate({{1, 5, 2}, {0, 1, 1}}).ok());
  auto with_types = engine->Run({{{1, 5, 9, 2}, {0, 0, 1, 1}}}, kOutputPooled);
  auto without = engine->Run({{{1, 5, 9, 2}, {}}}, kOutputPooled);
  ASSERT_TRUE(with_types.ok() && without.ok());
  EXPECT_EQ((*with_types)[0].pooled, (*without)[0].pooled);
  auto mismatch = engine->Validate({{1, 5, 2}, {0, 0}});
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kInvalidArgument);
  std::vector<int32_t> too_long(513, 5);
  auto long_status = engine->Validate({too_long, {}});
  EXPECT_EQ(long_status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(long_status.message()), HasSubstr("513 tokens"));
  // A bad sequence in Run is refused with its index, not computed.
  auto run = engine->Run({{{1, 5, 2}, {}}, {{1, 5000, 2}, {}}}, kOutputPooled);
  EXPECT_EQ(run.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(run.status().message()), HasSubstr("sequence 1"));
}

TEST(EngineTest, MaxLengthOption) {
  EngineOptions options;
  options.max_length = 64;
  auto engine = LoadOrDie(ReferenceDir("t5_v1_0"), options);
  ASSERT_NE(engine, nullptr);
  EXPECT_EQ(engine->info().max_length, 64);
  std::vector<int32_t> ids(65, 5);
  EXPECT_EQ(engine->Validate({ids, {}}).code(), absl::StatusCode::kInvalidArgument);
}

// Shards, and weights stored in bfloat16 / float16, load to the same model.
TEST(EngineTest, ShardedAndHalfPrecisionCheckpoints) {
  const std::string source = ReferenceDir("deberta_v3_like");
  auto reference = LoadOrDie(source);
  ASSERT_NE(reference, nullptr);
  auto seqs = ReferenceSequences("deberta_v3_like");
  auto want = reference->Run(seqs, kOutputTokenStates);
  ASSERT_TRUE(want.ok());

  ModelDirBuilder sharded(source);
  sharded.Write(/*shards=*/3);
  auto engine = LoadOrDie(sharded.dir());
  ASSERT_NE(engine, nullptr);
  auto got = engine->Run(seqs, kOutputTokenStates);
  ASSERT_TRUE(got.ok());
  for (size_t i = 0; i < seqs.size(); ++i) EXPECT_EQ((*got)[i].token_states, (*want)[i].token_states);

  for (StDType stored : {StDType::kBF16, StDType::kF16}) {
    ModelDirBuilder half(source);
    for (auto& [name, t] : half.tensors()) {
      std::vector<float> f(t.bytes.size() / 4);
      std::memcpy(f.data(), t.bytes.data(), t.bytes.size());
      std::string bytes(f.size() * 2, '\0');
      for (size_t i = 0; i < f.size(); ++i) {
        uint16_t h;
        if (stored == StDType::kF16) {
          _Float16 v = static_cast<_Float16>(f[i]);
          std::memcpy(&h, &v, 2);
        } else {
          uint32_t bits;
          std::memcpy(&bits, &f[i], 4);
          h = static_cast<uint16_t>((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16);
        }
        std::memcpy(&bytes[i * 2], &h, 2);
      }
      t.dtype = stored;
      t.bytes = bytes;
    }
    half.Write();
    auto half_engine = LoadOrDie(half.dir());
    ASSERT_NE(half_engine, nullptr);
    auto half_out = half_engine->Run(seqs, kOutputPooled);
    ASSERT_TRUE(half_out.ok());
    auto full_out = reference->Run(seqs, kOutputPooled);
    for (size_t i = 0; i < seqs.size(); ++i) {
      // Rounded weights move the output a little, never a lot.
      EXPECT_GT(Cosine((*half_out)[i].pooled, (*full_out)[i].pooled), 0.98);
      EXPECT_NE((*half_out)[i].pooled, (*full_out)[i].pooled);
    }
  }
}

// bfloat16 inference: how far from float32 (reported by the benchmark; bounded here).
TEST(EngineTest, BFloat16InferenceStaysCloseToFloat32) {
  for (const char* name : {"deberta_v3_cls", "t5_v1_0"}) {
    auto f32 = LoadOrDie(ReferenceDir(name));
    EngineOptions options;
    options.dtype = DType::kBFloat16;
    auto bf16 = LoadOrDie(ReferenceDir(name), options);
    ASSERT_NE(bf16, nullptr);
    EXPECT_EQ(bf16->info().dtype, DType::kBFloat16);
    auto seqs = ReferenceSequences(name);
    auto a = f32->Run(seqs, kOutputPooled);
    auto b = bf16->Run(seqs, kOutputPooled);
    ASSERT_TRUE(a.ok() && b.ok()) << b.status();
    for (size_t i = 0; i < seqs.size(); ++i) EXPECT_GT(Cosine((*a)[i].pooled, (*b)[i].pooled), 0.99) << name << " " << i;
  }
}

// ---- Broken model directories: each a precise status, never a crash or a half-loaded model.

absl::Status LoadStatus(const std::string& dir) { return LoadModel(dir, EngineOptions{}).status(); }

TEST(EngineLoadErrorTest, MissingDirectoryAndConfig) {
  EXPECT_EQ(LoadStatus("/nonexistent/model").code(), absl::StatusCode::kNotFound);
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.Write();
  std::remove((b.dir() + "/config.json").c_str());
  auto s = LoadStatus(b.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("config.json"));
}

TEST(EngineLoadErrorTest, ConfigProblems) {
  struct Case {
    std::function<void(nlohmann::json&)> edit;
    const char* message;
  };
  const std::vector<Case> cases = {
      {[](nlohmann::json& c) { c["model_type"] = "gpt2"; }, "\"model_type\" \"gpt2\" is not supported"},
      {[](nlohmann::json& c) { c.erase("model_type"); }, "no \"model_type\""},
      {[](nlohmann::json& c) { c["architectures"] = {"DebertaV2ForQuestionAnswering"}; }, "DebertaV2ForQuestionAnswering"},
      {[](nlohmann::json& c) { c["hidden_act"] = "swiglu"; }, "\"hidden_act\""},
      {[](nlohmann::json& c) { c["hidden_size"] = "32"; }, "\"hidden_size\" must be an integer"},
      {[](nlohmann::json& c) { c["num_attention_heads"] = 5; }, "not a multiple of num_attention_heads"},
      {[](nlohmann::json& c) { c["pos_att_type"] = {"c2p", "x2y"}; }, "unknown entry \"x2y\""},
      {[](nlohmann::json& c) { c["norm_rel_ebd"] = "batch_norm"; }, "norm_rel_ebd"},
      {[](nlohmann::json& c) { c["relative_attention"] = "yes"; }, "\"relative_attention\" must be true or false"},
  };
  for (const Case& c : cases) {
    ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
    c.edit(b.config());
    b.Write();
    auto s = LoadStatus(b.dir());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message));
  }
  ModelDirBuilder t5(ReferenceDir("t5_v1_0"));
  t5.config()["feed_forward_proj"] = "gated-gelu-new";
  t5.config().erase("dense_act_fn");
  t5.config().erase("is_gated_act");
  t5.Write();
  auto s = LoadStatus(t5.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("feed_forward_proj"));
}

TEST(EngineLoadErrorTest, MissingTensorNamesItAndItsShape) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.tensors().erase("encoder.layer.1.attention.self.key_proj.weight");
  b.Write();
  auto s = LoadStatus(b.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("encoder.layer.1.attention.self.key_proj.weight"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("[32, 32]"));
}

TEST(EngineLoadErrorTest, WrongShape) {
  ModelDirBuilder b(ReferenceDir("t5_v1_0"));
  auto& t = b.tensors()["encoder.block.1.layer.1.layer_norm.weight"];
  t.shape = {32};
  t.bytes.resize(32 * 4);
  b.Write();
  auto s = LoadStatus(b.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("encoder.block.1.layer.1.layer_norm.weight\" has shape [32], expected [64]"));
  // A tensor that holds a size of config.json: the disagreement names the key too.
  ModelDirBuilder c(ReferenceDir("t5_v1_0"));
  auto& final_norm = c.tensors()["encoder.final_layer_norm.weight"];
  final_norm.shape = {32};
  final_norm.bytes.resize(32 * 4);
  c.Write();
  s = LoadStatus(c.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr("\"d_model\" 64 in config.json disagrees with tensor \"encoder.final_layer_norm.weight\" of shape [32]"));
}

TEST(EngineLoadErrorTest, UnexpectedTensor) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.tensors()["encoder.unknown_module.weight"] = b.tensors()["encoder.layer.0.attention.self.query_proj.weight"];
  b.Write();
  auto s = LoadStatus(b.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unexpected tensor(s)"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("encoder.unknown_module.weight"));
  // A layer beyond num_hidden_layers: the count disagrees, and the message says how.
  ModelDirBuilder extra(ReferenceDir("deberta_v3_like"));
  extra.tensors()["encoder.layer.7.attention.self.query_proj.weight"] =
      extra.tensors()["encoder.layer.0.attention.self.query_proj.weight"];
  extra.Write();
  s = LoadStatus(extra.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("\"num_hidden_layers\" 3 in config.json disagrees with the checkpoint, "
                                                  "which holds 8 blocks (encoder.layer.0 to encoder.layer.7)"));
}

TEST(EngineLoadErrorTest, IntegerDtype) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.tensors()["embeddings.LayerNorm.bias"].dtype = StDType::kI32;
  b.Write();
  auto s = LoadStatus(b.dir());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("embeddings.LayerNorm.bias"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("not a floating-point type"));
}

TEST(EngineLoadErrorTest, TruncatedAndMissingWeights) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.Write();
  const std::string full = b.ReadRaw("model.safetensors");
  b.WriteRaw("model.safetensors", full.substr(0, full.size() - 100));
  EXPECT_EQ(LoadStatus(b.dir()).code(), absl::StatusCode::kDataLoss);
  b.WriteRaw("model.safetensors", "garbage");
  EXPECT_EQ(LoadStatus(b.dir()).code(), absl::StatusCode::kDataLoss);
  std::remove((b.dir() + "/model.safetensors").c_str());
  EXPECT_EQ(LoadStatus(b.dir()).code(), absl::StatusCode::kNotFound);
}

TEST(EngineLoadErrorTest, CorruptTokenizerFailsTheLoad) {
  ModelDirBuilder b(ReferenceDir("deberta_v3_like"));
  b.Write();
  b.WriteRaw("spm.model", "not a sentencepiece model");
  EXPECT_FALSE(LoadStatus(b.dir()).ok());
}

// Heads of other architectures are dropped, as transformers does; T5 decoders likewise.
TEST(EngineLoadTest, IgnoresOtherHeadsAndDecoders) {
  ModelDirBuilder deberta(ReferenceDir("deberta_v3_like"));
  deberta.tensors()["lm_predictions.lm_head.bias"] = deberta.tensors()["embeddings.LayerNorm.bias"];
  deberta.tensors()["embeddings.position_embeddings.weight"] = deberta.tensors()["encoder.rel_embeddings.weight"];
  deberta.Write();
  EXPECT_TRUE(LoadStatus(deberta.dir()).ok()) << LoadStatus(deberta.dir());

  ModelDirBuilder t5(ReferenceDir("t5_v1_0"));
  t5.tensors()["decoder.block.0.layer.0.SelfAttention.q.weight"] = t5.tensors()["encoder.block.0.layer.0.SelfAttention.q.weight"];
  t5.tensors()["lm_head.weight"] = t5.tensors()["shared.weight"];
  t5.config()["architectures"] = {"T5ForConditionalGeneration"};
  t5.Write();
  EXPECT_TRUE(LoadStatus(t5.dir()).ok()) << LoadStatus(t5.dir());
}

}  // namespace
}  // namespace relserve
