#ifndef RELSERVE_TESTS_MODEL_NAIVE_REFERENCE_H_
#define RELSERVE_TESTS_MODEL_NAIVE_REFERENCE_H_

// A deliberately naive, literal port of the forward passes of transformers 4.40.2
// (models/deberta_v2/modeling_deberta_v2.py, models/t5/modeling_t5.py, models/bert/modeling_bert.py,
// models/roberta/modeling_roberta.py, models/electra/modeling_electra.py, activations.py) in
// double precision: std::vector, explicit loops, no LibTorch. Each function names the Python
// function or module it follows. It reads config.json and the safetensors weights itself and
// shares no code with the engine's model implementation, so that the engine can be checked
// against it on configurations no transformers fixture covers.
//
// Where the reference computes something in float32 even in a float64 model (DeBERTa's log
// buckets and attention scale, T5's log buckets, T5LayerNorm's variance and T5's softmax),
// the port does the same.

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/model/engine.h"

namespace relserve::naive {

struct Tensor {
  std::vector<int64_t> shape;
  std::vector<double> data;  // row-major
};

// Named as Engine::ForwardPadded names them: hidden_state_0..N, last_hidden_state and, for
// sequence classifiers, logits [batch, num_labels].
using Outputs = std::map<std::string, Tensor>;

// The whole forward pass of the model in `model_dir` (config.json + model.safetensors or a
// sharded checkpoint) on a right-padded batch, as transformers' AutoModel /
// AutoModelForSequenceClassification with output_hidden_states=True computes it.
// DeBERTa: DebertaV2Model or DebertaV2ForSequenceClassification (from `architectures`).
// T5 / mT5: T5EncoderModel (any T5 architecture is run as its encoder).
// BERT / RoBERTa / XLM-RoBERTa / ELECTRA: *Model, or *ForSequenceClassification with its head.
// MPNet: naive_mpnet_reference.h.
absl::StatusOr<Outputs> Forward(const std::string& model_dir, const PaddedBatch& batch);

// ACT2FN[name](x) in float64. Throws std::invalid_argument for a name ACT2FN lacks.
double Activation(const std::string& name, double x);

// modeling_deberta_v2.build_relative_position(query_size, key_size, bucket_size,
// max_position)[0]: [query_size][key_size].
std::vector<std::vector<int64_t>> BuildRelativePosition(int64_t query_size, int64_t key_size,
                                                        int64_t bucket_size, int64_t max_position);

// T5Attention._relative_position_bucket for one relative position (memory - query).
int64_t T5RelativePositionBucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance);

// The tensor as the engine's float32 NamedTensor (for the fixture comparison helpers).
NamedTensor ToNamedTensor(const std::string& name, const Tensor& t);

}  // namespace relserve::naive

#endif  // RELSERVE_TESTS_MODEL_NAIVE_REFERENCE_H_
