#include "tests/model/families/mpnet/naive_mpnet_reference.h"

#include <cfloat>
#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <utility>

#include "server/checkpoint/safetensors_checkpoint.h"
#include "tests/model/naive_ops.h"

namespace relserve::naive {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error("naive MPNet: " + what); }

// getattr(config, key): config.json's value, else MPNetConfig.__init__'s default.
int64_t GetInt(const json& j, const char* key, int64_t def) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? def : it->get<int64_t>();
}
double GetDouble(const json& j, const char* key, double def) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? def : it->get<double>();
}
std::string GetString(const json& j, const char* key, const std::string& def) {
  auto it = j.find(key);
  return it == j.end() || it->is_null() ? def : it->get<std::string>();
}


// nn.Linear with its bias (naive_ops.h).
Vec Linear(const Vec& x, int64_t rows, const Tensor& w, const Tensor& b) { return naive::Linear(x, rows, w, &b); }


Vec Add(Vec a, const Vec& b) {
  for (size_t i = 0; i < a.size(); ++i) a[i] += b[i];
  return a;
}

// MPNetConfig's attributes, with __init__'s defaults.
struct MpnetConfig {
  std::string architecture;
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  std::string hidden_act;
  int64_t max_position_embeddings, relative_attention_num_buckets;
  double layer_norm_eps;

  explicit MpnetConfig(const json& j) {
    architecture = "MPNetModel";
    if (j.contains("architectures") && !j.at("architectures").is_null()) {
      architecture = j.at("architectures").at(0).get<std::string>();
    }
    vocab_size = GetInt(j, "vocab_size", 30527);
    hidden_size = GetInt(j, "hidden_size", 768);
    num_hidden_layers = GetInt(j, "num_hidden_layers", 12);
    num_attention_heads = GetInt(j, "num_attention_heads", 12);
    intermediate_size = GetInt(j, "intermediate_size", 3072);
    hidden_act = GetString(j, "hidden_act", "gelu");
    max_position_embeddings = GetInt(j, "max_position_embeddings", 512);
    layer_norm_eps = GetDouble(j, "layer_norm_eps", 1e-12);
    relative_attention_num_buckets = GetInt(j, "relative_attention_num_buckets", 32);
    // MPNetSelfAttention.__init__ (no embedding_size attribute in MPNetConfig)
    if (hidden_size % num_attention_heads != 0) Fail("the hidden size is not a multiple of the number of heads");
  }
};

// MPNetSelfAttention.forward (head_mask None) on hidden [B * L, H]: o(context).
Vec SelfAttention(const MpnetConfig& c, const Weights& w, const std::string& ap, const Vec& hidden,
                  const PaddedBatch& in, const Vec& position_bias, const Vec& extended_mask) {
  const int64_t B = in.batch, L = in.length, H = c.hidden_size, nh = c.num_attention_heads;
  const int64_t d = H / nh;  // attention_head_size = int(hidden_size / num_attention_heads)
  const Vec q = Linear(hidden, B * L, w.Get(ap + "q.weight", {H, H}), w.Get(ap + "q.bias", {H}));
  const Vec k = Linear(hidden, B * L, w.Get(ap + "k.weight", {H, H}), w.Get(ap + "k.bias", {H}));
  const Vec v = Linear(hidden, B * L, w.Get(ap + "v.weight", {H, H}), w.Get(ap + "v.bias", {H}));
  // transpose_for_scores: element [b, h, t, x] = proj[b, t, h * d + x]
  auto at = [&](const Vec& p, int64_t b, int64_t h, int64_t t, int64_t x) { return p[(b * L + t) * H + h * d + x]; };
  Vec context(static_cast<size_t>(B * L * H));
  Vec scores(static_cast<size_t>(L));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < nh; ++h) {
      for (int64_t i = 0; i < L; ++i) {
        for (int64_t j = 0; j < L; ++j) {
          double s = 0;
          for (int64_t x = 0; x < d; ++x) s += at(q, b, h, i, x) * at(k, b, h, j, x);
          s = s / std::sqrt(static_cast<double>(d));  // attention_scores / math.sqrt(head_size)
          s += position_bias[(h * L + i) * L + j];    // += position_bias
          s = s + extended_mask[b * L + j];           // + attention_mask
          scores[j] = s;
        }
        SoftmaxRow(scores.data(), L);  // nn.functional.softmax(dim=-1)
        // c = matmul(probs, v).permute(0, 2, 1, 3).view(B, L, all_head_size)
        for (int64_t x = 0; x < d; ++x) {
          double s = 0;
          for (int64_t j = 0; j < L; ++j) s += scores[j] * at(v, b, h, j, x);
          context[(b * L + i) * H + h * d + x] = s;
        }
      }
    }
  }
  return Linear(context, B * L, w.Get(ap + "o.weight", {H, H}), w.Get(ap + "o.bias", {H}));
}

// MPNetLayer.forward: MPNetAttention, MPNetIntermediate, MPNetOutput.
Vec Layer(const MpnetConfig& c, const Weights& w, const std::string& lp, const Vec& hidden, const PaddedBatch& in,
          const Vec& position_bias, const Vec& extended_mask) {
  const int64_t rows = in.batch * in.length, H = c.hidden_size, I = c.intermediate_size;
  const Vec self = SelfAttention(c, w, lp + "attention.attn.", hidden, in, position_bias, extended_mask);
  // MPNetAttention: LayerNorm(dropout(o) + hidden_states)
  const Vec attention_output = LayerNorm(Add(self, hidden), rows, H, w.Get(lp + "attention.LayerNorm.weight", {H}),
                                         w.Get(lp + "attention.LayerNorm.bias", {H}), c.layer_norm_eps);
  // MPNetIntermediate: ACT2FN[hidden_act](dense(x))
  Vec intermediate = Linear(attention_output, rows, w.Get(lp + "intermediate.dense.weight", {I, H}),
                            w.Get(lp + "intermediate.dense.bias", {I}));
  for (double& x : intermediate) x = Activation(c.hidden_act, x);
  // MPNetOutput: LayerNorm(dense(x) + input_tensor)
  const Vec output = Linear(intermediate, rows, w.Get(lp + "output.dense.weight", {H, I}),
                            w.Get(lp + "output.dense.bias", {H}));
  return LayerNorm(Add(output, attention_output), rows, H, w.Get(lp + "output.LayerNorm.weight", {H}),
                   w.Get(lp + "output.LayerNorm.bias", {H}), c.layer_norm_eps);
}

}  // namespace

int64_t MpnetRelativePositionBucket(int64_t relative_position, int64_t num_buckets, int64_t max_distance) {
  int64_t ret = 0;
  int64_t n = -relative_position;
  num_buckets /= 2;  // num_buckets //= 2
  ret += (n < 0 ? 1 : 0) * num_buckets;
  n = std::llabs(n);
  const int64_t max_exact = num_buckets / 2;
  const bool is_small = n < max_exact;
  // max_exact + (torch.log(n.float() / max_exact) / math.log(max_distance / max_exact)
  //              * (num_buckets - max_exact)).to(torch.long): float32 tensor ops (the Python
  // float scalar taken as float32), truncated toward zero.
  const float ratio = static_cast<float>(n) / static_cast<float>(max_exact);
  const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
  const float scaled = std::log(ratio) / denom * static_cast<float>(num_buckets - max_exact);
  int64_t val_if_large = is_small ? 0 : max_exact + static_cast<int64_t>(scaled);  // log(0) never taken
  val_if_large = std::min<int64_t>(val_if_large, num_buckets - 1);
  return ret + (is_small ? n : val_if_large);
}

std::vector<int64_t> MpnetPositionIds(const std::vector<int64_t>& row, int64_t padding_idx) {
  // mask = ne(padding_idx); incremental_indices = cumsum(mask) * mask; + padding_idx
  std::vector<int64_t> out(row.size());
  int64_t count = 0;
  for (size_t t = 0; t < row.size(); ++t) {
    const int64_t mask = row[t] != padding_idx ? 1 : 0;
    count += mask;
    out[t] = count * mask + padding_idx;
  }
  return out;
}

Outputs MpnetForward(const json& j, const std::string& model_dir, const PaddedBatch& in) {
  const MpnetConfig c(j);
  const bool classification = c.architecture == "MPNetForSequenceClassification";
  if (!classification && c.architecture != "MPNetModel" && c.architecture != "MPNetForMaskedLM") {
    Fail("unsupported architecture " + c.architecture);
  }
  const Weights w(model_dir, "naive MPNet: ");
  // from_pretrained: the base model's weights under "mpnet." when the checkpoint has that prefix.
  const std::string p = w.Has("mpnet.embeddings.word_embeddings.weight") ? "mpnet." : "";
  const int64_t B = in.batch, L = in.length, H = c.hidden_size, nh = c.num_attention_heads;
  constexpr int64_t kPaddingIdx = 1;  // MPNetEmbeddings.padding_idx

  // MPNetEmbeddings.forward: position_ids = create_position_ids_from_input_ids(input_ids, 1)
  const Tensor& word = w.Get(p + "embeddings.word_embeddings.weight", {c.vocab_size, H});
  const Tensor& position = w.Get(p + "embeddings.position_embeddings.weight", {c.max_position_embeddings, H});
  Vec embeddings(static_cast<size_t>(B * L * H));
  for (int64_t b = 0; b < B; ++b) {
    const std::vector<int64_t> row(in.input_ids.begin() + b * L, in.input_ids.begin() + (b + 1) * L);
    const std::vector<int64_t> position_ids = MpnetPositionIds(row, kPaddingIdx);
    for (int64_t t = 0; t < L; ++t) {
      const int64_t id = row[t], pos = position_ids[t];
      if (id < 0 || id >= c.vocab_size) Fail("input id out of range");
      if (pos >= c.max_position_embeddings) Fail("position id out of range");
      for (int64_t k = 0; k < H; ++k) {
        embeddings[(b * L + t) * H + k] = word.data[id * H + k] + position.data[pos * H + k];
      }
    }
  }
  Vec hidden = LayerNorm(embeddings, B * L, H, w.Get(p + "embeddings.LayerNorm.weight", {H}),
                         w.Get(p + "embeddings.LayerNorm.bias", {H}), c.layer_norm_eps);

  // get_extended_attention_mask: (1.0 - mask) * torch.finfo(float64).min
  Vec extended_mask(static_cast<size_t>(B * L));
  for (int64_t n = 0; n < B * L; ++n) extended_mask[n] = (1.0 - static_cast<double>(in.attention_mask[n])) * -DBL_MAX;

  // MPNetEncoder.compute_position_bias(hidden_states): one [heads, L, L] bias for every row and
  // layer, relative_attention_bias(relative_position_bucket(memory - context)) with 32 buckets.
  const std::string ep = p + "encoder.";
  const Tensor& table = w.Get(ep + "relative_attention_bias.weight", {c.relative_attention_num_buckets, nh});
  Vec position_bias(static_cast<size_t>(nh * L * L));
  for (int64_t i = 0; i < L; ++i) {
    for (int64_t jj = 0; jj < L; ++jj) {
      const int64_t bucket = MpnetRelativePositionBucket(jj - i);
      if (bucket >= c.relative_attention_num_buckets) Fail("bucket outside relative_attention_bias");
      for (int64_t h = 0; h < nh; ++h) position_bias[(h * L + i) * L + jj] = table.data[bucket * nh + h];
    }
  }

  std::vector<Vec> all_hidden_states;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    all_hidden_states.push_back(hidden);
    hidden = Layer(c, w, ep + "layer." + std::to_string(i) + ".", hidden, in, position_bias, extended_mask);
  }
  all_hidden_states.push_back(hidden);

  Outputs out;
  for (size_t i = 0; i < all_hidden_states.size(); ++i) {
    out["hidden_state_" + std::to_string(i)] = Tensor{{B, L, H}, all_hidden_states[i]};
  }
  out["last_hidden_state"] = Tensor{{B, L, H}, hidden};

  if (classification) {
    // MPNetClassificationHead: out_proj(tanh(dense(features[:, 0, :])))
    int64_t num_labels = GetInt(j, "num_labels", 2);
    if (j.contains("id2label") && !j.at("id2label").is_null()) num_labels = static_cast<int64_t>(j.at("id2label").size());
    Vec first(static_cast<size_t>(B * H));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < H; ++k) first[b * H + k] = hidden[(b * L) * H + k];
    }
    Vec x = Linear(first, B, w.Get("classifier.dense.weight", {H, H}), w.Get("classifier.dense.bias", {H}));
    for (double& v : x) v = std::tanh(v);
    out["logits"] = Tensor{{B, num_labels},
                           Linear(x, B, w.Get("classifier.out_proj.weight", {num_labels, H}),
                                  w.Get("classifier.out_proj.bias", {num_labels}))};
  }
  return out;
}

}  // namespace relserve::naive
