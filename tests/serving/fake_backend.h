#ifndef RELSERVE_TESTS_SERVING_FAKE_BACKEND_H_
#define RELSERVE_TESTS_SERVING_FAKE_BACKEND_H_

#include <atomic>
#include <cmath>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "server/backend/inference_backend.h"
#include "server/batching/model_batcher.h"
#include "server/serving/encoder_serving.h"
#include "server/serving/model_registry.h"

namespace relserve {

// Outputs that are simple functions of the ids: pooled = [sum, count, 1, 2], token states =
// the id repeated hidden times, logits from a table (or the first id plus the length).
class FakeBackend : public InferenceBackend {
 public:
  FakeBackend(std::vector<std::string> labels, std::string problem_type, std::vector<float> logits = {})
      : logits_(std::move(logits)) {
    info_.architecture = labels.empty() ? "FakeModel" : "FakeForSequenceClassification";
    info_.model_type = "fake";
    info_.hidden_size = 3;
    info_.num_layers = 1;
    info_.vocab_size = 1000;
    info_.max_length = 16;
    info_.embedding_dim = 4;
    info_.pooling.modes = {PoolingMode::kMean};
    info_.labels = std::move(labels);
    info_.problem_type = ProblemTypeFromConfig(problem_type);
    info_.dtype = DType::kBFloat16;
    info_.device = "cpu";
  }
  const ModelInfo& info() const override { return info_; }
  absl::Status Validate(const SequenceInput& s) const override {
    for (int32_t id : s.input_ids) {
      if (id < 0 || id >= info_.vocab_size) return absl::InvalidArgumentError("id out of range");
    }
    return absl::OkStatus();
  }
  // Logits from a function of the sequence instead (set before any call).
  void set_logit_fn(std::function<std::vector<float>(const SequenceInput&)> fn) { logit_fn_ = std::move(fn); }
  // Sparse and multi-vector outputs: sparse = (id, id / 100) for each distinct id of the
  // sequence but 0 and 1; multi-vector = one vector [id, 1] per token after the first.
  void set_heads(bool sparse, bool multi_vector) {
    info_.sparse_kind = sparse ? "splade" : "";
    info_.multi_vector_kind = multi_vector ? "colbert" : "";
    info_.multi_vector_dim = multi_vector ? 2 : 0;
  }
  void set_dtype(DType dtype) { info_.dtype = dtype; }
  void set_vocab_size(int vocab_size) { info_.vocab_size = vocab_size; }
  // What config.json says of Matryoshka training (ModelInfo::is_matryoshka, matryoshka_dimensions).
  void set_matryoshka(std::optional<bool> is_matryoshka, std::vector<int> dimensions = {}) {
    info_.is_matryoshka = is_matryoshka;
    info_.matryoshka_dimensions = std::move(dimensions);
  }
  // A token-classification head: each token's logits from its id alone (kOutputTokenLogits);
  // `vocab_size` as the tokenizer it is served with.
  void set_token_head(std::vector<std::string> labels, std::function<std::vector<float>(int32_t id)> fn,
                      int vocab_size) {
    info_.vocab_size = vocab_size;
    info_.token_labels = std::move(labels);
    token_logit_fn_ = std::move(fn);
  }
  // A Normalize module: pooled is normalised, pooled_unnormalized not.
  void set_normalizes(bool normalizes) { info_.pooling.normalize = normalizes; }
  // The batches' output flags, ORed.
  uint32_t seen_outputs() const { return seen_outputs_.load(); }
  absl::StatusOr<std::vector<SequenceOutput>> Run(const std::vector<SequenceInput>& batch, uint32_t outputs) override {
    runs_ += static_cast<int>(batch.size());
    seen_outputs_ |= outputs;
    if ((outputs & kOutputSparse) && info_.sparse_kind.empty()) return absl::FailedPreconditionError("no sparse head");
    std::vector<SequenceOutput> out;
    for (const SequenceInput& s : batch) {
      SequenceOutput o;
      o.num_tokens = static_cast<int32_t>(s.input_ids.size());
      float sum = 0;
      for (int32_t id : s.input_ids) sum += static_cast<float>(id);
      const std::vector<float> pooled = {sum, static_cast<float>(s.input_ids.size()), 1, 2};
      if (outputs & kOutputPooled) o.pooled = info_.pooling.normalize ? Normalized(pooled) : pooled;
      if (outputs & kOutputPooledUnnormalized) o.pooled_unnormalized = pooled;
      if (outputs & kOutputSparse) {
        std::set<int32_t> ids(s.input_ids.begin(), s.input_ids.end());
        for (int32_t id : ids) {
          if (id > 1) o.sparse.emplace_back(id, static_cast<float>(id) / 100);
        }
      }
      if (outputs & kOutputMultiVector) {
        for (size_t t = 1; t < s.input_ids.size(); ++t) {
          o.multi_vector.push_back(static_cast<float>(s.input_ids[t]));
          o.multi_vector.push_back(1);
        }
        o.num_vectors = static_cast<int32_t>(s.input_ids.size()) - 1;
      }
      if (outputs & kOutputTokenStates) {
        for (int32_t id : s.input_ids) o.token_states.insert(o.token_states.end(), 3, static_cast<float>(id));
      }
      if (outputs & kOutputTokenLogits) {
        if (!token_logit_fn_) return absl::FailedPreconditionError("no token-classification head");
        for (int32_t id : s.input_ids) {
          const std::vector<float> l = token_logit_fn_(id);
          o.token_logits.insert(o.token_logits.end(), l.begin(), l.end());
        }
      }
      if (outputs & kOutputLogits) {
        if (logit_fn_) {
          o.logits = logit_fn_(s);
        } else if (!logits_.empty()) {
          o.logits = logits_;
        } else {
          // The first id plus the length: pairs of different lengths score differently.
          o.logits.assign(info_.labels.size(), static_cast<float>(s.input_ids[0] + s.input_ids.size() - 1));
        }
        if (s.input_ids[0] == 999) o.logits[0] = NAN;  // a model that overflows on this input
      }
      out.push_back(std::move(o));
    }
    return out;
  }
  int runs() const { return runs_.load(); }

  static std::vector<float> Normalized(std::vector<float> v) {
    double n = 0;
    for (float x : v) n += double(x) * x;
    for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
    return v;
  }

 private:
  ModelInfo info_;
  std::vector<float> logits_;
  std::function<std::vector<float>(const SequenceInput&)> logit_fn_;
  std::function<std::vector<float>(int32_t)> token_logit_fn_;
  std::atomic<int> runs_{0};
  std::atomic<uint32_t> seen_outputs_{0};
};

// Models behind real batchers (no queue delay) and the serving layer over them.
class ServingHarness {
 public:
  ~ServingHarness() {
    for (auto& b : batchers_) b->Stop(absl::Seconds(5));
  }
  // Call before serving(): the registry is read when the serving layer is made.
  void Add(const std::string& name, std::unique_ptr<FakeBackend> backend, const Tokenizer* tokenizer,
           int max_length) {
    BatcherConfig config;
    config.policy.max_queue_delay = absl::ZeroDuration();
    auto batcher = ModelBatcher::Create(backend.get(), config, nullptr);
    ASSERT_TRUE(batcher.ok()) << batcher.status();
    ServedModel m;
    m.name = name;
    m.backend = backend.get();
    m.batcher = batcher->get();
    m.tokenizer = tokenizer;
    m.max_length = max_length;
    registry_.Add(m);
    backends_.push_back(std::move(backend));
    batchers_.push_back(std::move(*batcher));
  }
  void Serve(ServingLimits limits) { serving_ = std::make_unique<EncoderServing>(&registry_, &metrics_, limits); }

  EncoderServing& serving() { return *serving_; }
  ServerMetrics& metrics() { return metrics_; }
  const ModelRegistry& registry() const { return registry_; }
  FakeBackend& backend(size_t i) { return *backends_[i]; }
  const std::vector<std::unique_ptr<FakeBackend>>& backends() const { return backends_; }

  // Runs an asynchronous call and waits for its answer.
  template <typename Request, typename Result>
  absl::StatusOr<Result> Call(void (EncoderServing::*method)(const Request&, const CallContext&,
                                                             EncoderServing::Done<Result>) const,
                              const Request& request, CallContext context = {}) {
    std::promise<absl::StatusOr<Result>> answer;
    (serving_.get()->*method)(request, context, [&answer](absl::StatusOr<Result> r) { answer.set_value(std::move(r)); });
    return answer.get_future().get();
  }

 private:
  ModelRegistry registry_;
  ServerMetrics metrics_;
  std::vector<std::unique_ptr<FakeBackend>> backends_;
  std::vector<std::unique_ptr<ModelBatcher>> batchers_;
  std::unique_ptr<EncoderServing> serving_;
};

}  // namespace relserve

#endif  // RELSERVE_TESTS_SERVING_FAKE_BACKEND_H_
