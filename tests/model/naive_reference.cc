#include "tests/model/naive_reference.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <utility>

#include "nlohmann/json.hpp"
#include "server/checkpoint/safetensors_checkpoint.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "tests/model/families/mpnet/naive_mpnet_reference.h"
#include "tests/model/families/xlnet/naive_xlnet.h"
#include "tests/model/naive_ops.h"

namespace relserve::naive {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error(what); }

// ---------------------------------------------------------------------------------------------
// config.json as a PretrainedConfig: every key becomes an attribute; the modeling code reads
// the optional ones with getattr(config, key, default).

bool HasKey(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}

int64_t GetInt(const json& j, const char* key, int64_t def) {
  if (!HasKey(j, key)) return def;
  const json& v = j.at(key);
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float() && std::floor(v.get<double>()) == v.get<double>()) {
    return static_cast<int64_t>(v.get<double>());
  }
  Fail(std::string("config key ") + key + " is not an integer");
}

double GetDouble(const json& j, const char* key, double def) {
  return HasKey(j, key) ? j.at(key).get<double>() : def;
}

bool GetBool(const json& j, const char* key, bool def) {
  return HasKey(j, key) ? j.at(key).get<bool>() : def;
}

std::string GetString(const json& j, const char* key, const std::string& def) {
  return HasKey(j, key) ? j.at(key).get<std::string>() : def;
}

std::string Lower(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string Strip(const std::string& s) {
  size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b]))) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1]))) --e;
  return s.substr(b, e - b);
}

// Python's str.split(sep).
std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    if (pos == std::string::npos) {
      out.push_back(s.substr(start));
      return out;
    }
    out.push_back(s.substr(start, pos - start));
    start = pos + 1;
  }
}

bool In(const std::vector<std::string>& list, const std::string& item) {
  return std::find(list.begin(), list.end(), item) != list.end();
}

// The checkpoint's tensors, as float64: naive_ops.h's Weights.

// ---------------------------------------------------------------------------------------------
// torch.nn building blocks on row-major [rows, features] buffers.



void ApplyActivation(const std::string& name, Vec* x) {
  for (double& v : *x) v = Activation(name, v);
}

double Sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }


// ---------------------------------------------------------------------------------------------
// DeBERTa-v2 (modeling_deberta_v2.py).

// The DebertaV2Config attributes the modeling code reads, with DebertaV2Config.__init__'s
// defaults and the modeling code's getattr defaults.
struct DebertaConfig {
  std::string architecture;
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  std::string hidden_act;
  int64_t max_position_embeddings, type_vocab_size;
  double layer_norm_eps;
  bool relative_attention;
  int64_t max_relative_positions, position_buckets;
  bool position_biased_input;
  std::vector<std::string> pos_att_type;
  std::string pooler_hidden_act;
  int64_t pooler_hidden_size;
  bool share_att_key;
  std::string norm_rel_ebd;
  int64_t embedding_size, attention_head_size;
  int64_t conv_kernel_size, conv_groups;
  std::string conv_act;

  explicit DebertaConfig(const json& j) {
    architecture = "DebertaV2Model";
    if (HasKey(j, "architectures")) architecture = j.at("architectures").at(0).get<std::string>();
    // DebertaV2Config.__init__
    vocab_size = GetInt(j, "vocab_size", 128100);
    hidden_size = GetInt(j, "hidden_size", 1536);
    num_hidden_layers = GetInt(j, "num_hidden_layers", 24);
    num_attention_heads = GetInt(j, "num_attention_heads", 24);
    intermediate_size = GetInt(j, "intermediate_size", 6144);
    hidden_act = GetString(j, "hidden_act", "gelu");
    max_position_embeddings = GetInt(j, "max_position_embeddings", 512);
    type_vocab_size = GetInt(j, "type_vocab_size", 0);
    layer_norm_eps = GetDouble(j, "layer_norm_eps", 1e-7);
    relative_attention = GetBool(j, "relative_attention", false);
    max_relative_positions = GetInt(j, "max_relative_positions", -1);
    position_biased_input = GetBool(j, "position_biased_input", true);
    // Backwards compatibility: if isinstance(pos_att_type, str):
    //   pos_att_type = [x.strip() for x in pos_att_type.lower().split("|")]
    if (HasKey(j, "pos_att_type")) {
      const json& v = j.at("pos_att_type");
      if (v.is_string()) {
        for (const std::string& x : Split(Lower(v.get<std::string>()), '|')) pos_att_type.push_back(Strip(x));
      } else {
        for (const json& x : v) pos_att_type.push_back(x.get<std::string>());
      }
    }
    pooler_hidden_act = GetString(j, "pooler_hidden_act", "gelu");
    pooler_hidden_size = GetInt(j, "pooler_hidden_size", hidden_size);
    // getattr(config, ..., default) in the modules.
    position_buckets = GetInt(j, "position_buckets", -1);
    share_att_key = GetBool(j, "share_att_key", false);
    norm_rel_ebd = GetString(j, "norm_rel_ebd", "none");
    embedding_size = GetInt(j, "embedding_size", hidden_size);
    attention_head_size = GetInt(j, "attention_head_size", hidden_size / num_attention_heads);
    conv_kernel_size = GetInt(j, "conv_kernel_size", 0);
    conv_groups = GetInt(j, "conv_groups", 1);
    conv_act = GetString(j, "conv_act", "tanh");
    if (hidden_size % num_attention_heads != 0) Fail("hidden_size is not a multiple of heads");
  }
};

// make_log_bucket_position. relative_pos is a LongTensor; `abs_pos / mid` and the logs are
// float32 (torch's default dtype), so the arithmetic here is float.
int64_t MakeLogBucketPosition(int64_t relative_pos, int64_t bucket_size, int64_t max_position) {
  const int64_t sign = relative_pos > 0 ? 1 : (relative_pos < 0 ? -1 : 0);  // torch.sign
  const int64_t mid = bucket_size / 2;
  // abs_pos = where((relative_pos < mid) & (relative_pos > -mid), mid - 1, abs(relative_pos))
  const int64_t abs_pos =
      (relative_pos < mid && relative_pos > -mid) ? mid - 1 : std::llabs(relative_pos);
  // log_pos = ceil(log(abs_pos / mid) / log(tensor((max_position - 1) / mid)) * (mid - 1)) + mid
  const float ratio = static_cast<float>(abs_pos) / static_cast<float>(mid);
  const float log_ratio = std::log(ratio);
  const float base = static_cast<float>(static_cast<double>(max_position - 1) / static_cast<double>(mid));
  const float log_base = std::log(base);
  const float log_pos = std::ceil(log_ratio / log_base * static_cast<float>(mid - 1)) + static_cast<float>(mid);
  // bucket_pos = where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)
  const float bucket_pos = abs_pos <= mid ? static_cast<float>(relative_pos) : log_pos * static_cast<float>(sign);
  return static_cast<int64_t>(bucket_pos);  // .to(torch.long) truncates; values are integral
}

// DebertaV2Embeddings.forward with position_ids = arange(seq_length) and mask = attention_mask.
Vec DebertaEmbeddings(const DebertaConfig& c, const Weights& w, const std::string& p, const PaddedBatch& in) {
  const int64_t B = in.batch, L = in.length, E = c.embedding_size, H = c.hidden_size;
  const Tensor& word = w.Get(p + "embeddings.word_embeddings.weight", {c.vocab_size, E});
  const Tensor* position = nullptr;
  if (c.position_biased_input) {
    position = &w.Get(p + "embeddings.position_embeddings.weight", {c.max_position_embeddings, E});
  }
  const Tensor* token_type = nullptr;
  if (c.type_vocab_size > 0) {
    token_type = &w.Get(p + "embeddings.token_type_embeddings.weight", {c.type_vocab_size, E});
  }
  Vec embeddings(static_cast<size_t>(B * L * E));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t t = 0; t < L; ++t) {
      const int64_t id = in.input_ids[b * L + t];
      const int64_t tt = in.token_type_ids.empty() ? 0 : in.token_type_ids[b * L + t];
      if (id < 0 || id >= c.vocab_size) Fail("input id out of range");
      double* e = &embeddings[(b * L + t) * E];
      for (int64_t k = 0; k < E; ++k) e[k] = word.data[id * E + k];  // inputs_embeds
      if (c.position_biased_input) {
        for (int64_t k = 0; k < E; ++k) e[k] += position->data[t * E + k];
      }
      if (c.type_vocab_size > 0) {
        if (tt < 0 || tt >= c.type_vocab_size) Fail("token type id out of range");
        for (int64_t k = 0; k < E; ++k) e[k] += token_type->data[tt * E + k];
      }
    }
  }
  if (E != H) {
    embeddings = Linear(embeddings, B * L, w.Get(p + "embeddings.embed_proj.weight", {H, E}), nullptr);
  }
  embeddings = LayerNorm(embeddings, B * L, H, w.Get(p + "embeddings.LayerNorm.weight", {H}),
                         w.Get(p + "embeddings.LayerNorm.bias", {H}), c.layer_norm_eps);
  for (int64_t bt = 0; bt < B * L; ++bt) {
    for (int64_t k = 0; k < H; ++k) embeddings[bt * H + k] *= static_cast<double>(in.attention_mask[bt]);
  }
  return embeddings;
}

// DisentangledSelfAttention.transpose_for_scores followed by .repeat(repeat, 1, 1):
// x [batch, rows, heads * d] -> [batch * repeat * heads, rows, d], index ((b * heads + h) * rows + i) * d.
Vec TransposeForScores(const Vec& x, int64_t batch, int64_t rows, int64_t heads, int64_t repeat = 1) {
  const int64_t d = static_cast<int64_t>(x.size()) / (batch * rows * heads);
  Vec out(static_cast<size_t>(repeat * batch * heads * rows * d));
  for (int64_t r = 0; r < repeat; ++r) {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t bh = (r * batch + b) * heads + h;
        for (int64_t i = 0; i < rows; ++i) {
          for (int64_t k = 0; k < d; ++k) out[(bh * rows + i) * d + k] = x[(b * rows + i) * heads * d + h * d + k];
        }
      }
    }
  }
  return out;
}

// DisentangledSelfAttention.forward (query_states None) including disentangled_attention_bias.
// Returns the context layer [B, L, all_head_size].
Vec DisentangledSelfAttention(const DebertaConfig& c, const Weights& w, const std::string& lp, const Vec& hidden,
                              const PaddedBatch& in, const std::vector<std::vector<int64_t>>& relative_pos,
                              const Vec* rel_embeddings, int64_t rel_rows) {
  const int64_t B = in.batch, L = in.length, H = c.hidden_size, nh = c.num_attention_heads;
  const int64_t d = c.attention_head_size, A = nh * d;
  const std::string sp = lp + "attention.self.";
  const Tensor& q_w = w.Get(sp + "query_proj.weight", {A, H});
  const Tensor& q_b = w.Get(sp + "query_proj.bias", {A});
  const Tensor& k_w = w.Get(sp + "key_proj.weight", {A, H});
  const Tensor& k_b = w.Get(sp + "key_proj.bias", {A});
  const Tensor& v_w = w.Get(sp + "value_proj.weight", {A, H});
  const Tensor& v_b = w.Get(sp + "value_proj.bias", {A});

  const Vec query_layer = TransposeForScores(Linear(hidden, B * L, q_w, &q_b), B, L, nh);
  const Vec key_layer = TransposeForScores(Linear(hidden, B * L, k_w, &k_b), B, L, nh);
  const Vec value_layer = TransposeForScores(Linear(hidden, B * L, v_w, &v_b), B, L, nh);
  const int64_t BH = B * nh;
  auto qidx = [&](int64_t bh, int64_t i, int64_t k) { return (bh * L + i) * d + k; };

  const bool has_c2p = In(c.pos_att_type, "c2p");
  const bool has_p2c = In(c.pos_att_type, "p2c");
  int64_t scale_factor = 1;
  if (has_c2p) scale_factor += 1;
  if (has_p2c) scale_factor += 1;
  // scale = torch.sqrt(torch.tensor(query_layer.size(-1), dtype=torch.float) * scale_factor)
  const double scale = static_cast<double>(std::sqrt(static_cast<float>(d) * static_cast<float>(scale_factor)));

  // attention_scores = bmm(query_layer, key_layer^T) / scale
  Vec scores(static_cast<size_t>(BH * L * L));
  for (int64_t bh = 0; bh < BH; ++bh) {
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t j = 0; j < L; ++j) {
        double s = 0;
        for (int64_t k = 0; k < d; ++k) s += query_layer[qidx(bh, i, k)] * key_layer[qidx(bh, j, k)];
        scores[(bh * L + i) * L + j] = s / scale;
      }
    }
  }

  if (c.relative_attention) {
    // disentangled_attention_bias(query_layer, key_layer, relative_pos, rel_embeddings, scale_factor)
    const int64_t att_span = c.position_buckets > 0 ? c.position_buckets
                                                    : (c.max_relative_positions < 1 ? c.max_position_embeddings
                                                                                    : c.max_relative_positions);
    // rel_embeddings = rel_embeddings[0 : att_span * 2, :]
    const int64_t R = std::min<int64_t>(att_span * 2, rel_rows);
    Vec rel(rel_embeddings->begin(), rel_embeddings->begin() + R * H);
    Vec pos_key_layer, pos_query_layer;  // [BH, R, d]
    if (c.share_att_key) {
      pos_query_layer = TransposeForScores(Linear(rel, R, q_w, &q_b), 1, R, nh, B);
      pos_key_layer = TransposeForScores(Linear(rel, R, k_w, &k_b), 1, R, nh, B);
    } else {
      if (has_c2p) {
        pos_key_layer = TransposeForScores(
            Linear(rel, R, w.Get(sp + "pos_key_proj.weight", {A, H}), &w.Get(sp + "pos_key_proj.bias", {A})), 1, R,
            nh, B);
      }
      if (has_p2c) {
        pos_query_layer = TransposeForScores(
            Linear(rel, R, w.Get(sp + "pos_query_proj.weight", {A, H}), &w.Get(sp + "pos_query_proj.bias", {A})),
            1, R, nh, B);
      }
    }
    auto pidx = [&](int64_t bh, int64_t r, int64_t k) { return (bh * R + r) * d + k; };
    auto clamp = [&](int64_t v) { return std::min<int64_t>(std::max<int64_t>(v, 0), att_span * 2 - 1); };

    Vec score(static_cast<size_t>(BH * L * L), 0.0);
    if (has_c2p) {
      const double c2p_scale =
          static_cast<double>(std::sqrt(static_cast<float>(d) * static_cast<float>(scale_factor)));
      // c2p_att = bmm(query_layer, pos_key_layer^T): [BH, L, R]
      Vec c2p_att(static_cast<size_t>(BH * L * R));
      for (int64_t bh = 0; bh < BH; ++bh) {
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t r = 0; r < R; ++r) {
            double s = 0;
            for (int64_t k = 0; k < d; ++k) s += query_layer[qidx(bh, i, k)] * pos_key_layer[pidx(bh, r, k)];
            c2p_att[(bh * L + i) * R + r] = s;
          }
        }
      }
      // c2p_pos = clamp(relative_pos + att_span, 0, att_span * 2 - 1)
      // c2p_att = gather(c2p_att, dim=-1, index=c2p_pos expanded to [BH, L, L])
      for (int64_t bh = 0; bh < BH; ++bh) {
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t j = 0; j < L; ++j) {
            const int64_t c2p_pos = clamp(relative_pos[i][j] + att_span);
            if (c2p_pos >= R) Fail("c2p index outside the relative embeddings");
            score[(bh * L + i) * L + j] += c2p_att[(bh * L + i) * R + c2p_pos] / c2p_scale;
          }
        }
      }
    }
    if (has_p2c) {
      const double p2c_scale =
          static_cast<double>(std::sqrt(static_cast<float>(d) * static_cast<float>(scale_factor)));
      // key and query have the same length: r_pos = relative_pos
      // p2c_pos = clamp(-r_pos + att_span, 0, att_span * 2 - 1)
      // p2c_att = bmm(key_layer, pos_query_layer^T): [BH, L(key), R]
      Vec p2c_att(static_cast<size_t>(BH * L * R));
      for (int64_t bh = 0; bh < BH; ++bh) {
        for (int64_t a = 0; a < L; ++a) {
          for (int64_t r = 0; r < R; ++r) {
            double s = 0;
            for (int64_t k = 0; k < d; ++k) s += key_layer[qidx(bh, a, k)] * pos_query_layer[pidx(bh, r, k)];
            p2c_att[(bh * L + a) * R + r] = s;
          }
        }
      }
      // gathered[bh][a][b] = p2c_att[bh][a][p2c_pos[a][b]] (gather, dim=-1), then .transpose(-1, -2)
      Vec gathered(static_cast<size_t>(BH * L * L));
      for (int64_t bh = 0; bh < BH; ++bh) {
        for (int64_t a = 0; a < L; ++a) {
          for (int64_t b = 0; b < L; ++b) {
            const int64_t p2c_pos = clamp(-relative_pos[a][b] + att_span);
            if (p2c_pos >= R) Fail("p2c index outside the relative embeddings");
            gathered[(bh * L + a) * L + b] = p2c_att[(bh * L + a) * R + p2c_pos];
          }
        }
      }
      for (int64_t bh = 0; bh < BH; ++bh) {
        for (int64_t i = 0; i < L; ++i) {
          for (int64_t j = 0; j < L; ++j) {
            score[(bh * L + i) * L + j] += gathered[(bh * L + j) * L + i] / p2c_scale;
          }
        }
      }
    }
    for (size_t n = 0; n < scores.size(); ++n) scores[n] += score[n];
  }

  // XSoftmax.forward(attention_scores, attention_mask, -1), with
  // attention_mask[b, 0, i, j] = mask[b, i] * mask[b, j] (DebertaV2Encoder.get_attention_mask).
  const double finfo_min = -DBL_MAX;
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / nh;
    for (int64_t i = 0; i < L; ++i) {
      double* row = &scores[(bh * L + i) * L];
      std::vector<bool> rmask(static_cast<size_t>(L));
      for (int64_t j = 0; j < L; ++j) {
        rmask[j] = (in.attention_mask[b * L + i] * in.attention_mask[b * L + j]) == 0;
        if (rmask[j]) row[j] = finfo_min;  // masked_fill(rmask, finfo.min)
      }
      SoftmaxRow(row, L);
      for (int64_t j = 0; j < L; ++j) {
        if (rmask[j]) row[j] = 0;  // masked_fill_(rmask, 0)
      }
    }
  }

  // context_layer = bmm(attention_probs, value_layer), back to [B, L, nh * d]
  Vec context(static_cast<size_t>(B * L * A));
  for (int64_t bh = 0; bh < BH; ++bh) {
    const int64_t b = bh / nh, h = bh % nh;
    for (int64_t i = 0; i < L; ++i) {
      for (int64_t k = 0; k < d; ++k) {
        double s = 0;
        for (int64_t j = 0; j < L; ++j) s += scores[(bh * L + i) * L + j] * value_layer[qidx(bh, j, k)];
        context[(b * L + i) * A + h * d + k] = s;
      }
    }
  }
  return context;
}

// DebertaV2Layer.forward: DebertaV2Attention (self + DebertaV2SelfOutput), DebertaV2Intermediate,
// DebertaV2Output.
Vec DebertaLayer(const DebertaConfig& c, const Weights& w, const std::string& lp, const Vec& hidden,
                 const PaddedBatch& in, const std::vector<std::vector<int64_t>>& relative_pos,
                 const Vec* rel_embeddings, int64_t rel_rows) {
  const int64_t rows = in.batch * in.length, H = c.hidden_size, I = c.intermediate_size;
  const int64_t A = c.num_attention_heads * c.attention_head_size;
  const Vec self_output = DisentangledSelfAttention(c, w, lp, hidden, in, relative_pos, rel_embeddings, rel_rows);
  // DebertaV2SelfOutput: LayerNorm(dense(hidden_states) + input_tensor)
  Vec attention_output = Linear(self_output, rows, w.Get(lp + "attention.output.dense.weight", {H, A}),
                                &w.Get(lp + "attention.output.dense.bias", {H}));
  for (size_t n = 0; n < attention_output.size(); ++n) attention_output[n] += hidden[n];
  attention_output = LayerNorm(attention_output, rows, H, w.Get(lp + "attention.output.LayerNorm.weight", {H}),
                               w.Get(lp + "attention.output.LayerNorm.bias", {H}), c.layer_norm_eps);
  // DebertaV2Intermediate: act(dense(x))
  Vec intermediate = Linear(attention_output, rows, w.Get(lp + "intermediate.dense.weight", {I, H}),
                            &w.Get(lp + "intermediate.dense.bias", {I}));
  ApplyActivation(c.hidden_act, &intermediate);
  // DebertaV2Output: LayerNorm(dense(x) + attention_output)
  Vec layer_output = Linear(intermediate, rows, w.Get(lp + "output.dense.weight", {H, I}),
                            &w.Get(lp + "output.dense.bias", {H}));
  for (size_t n = 0; n < layer_output.size(); ++n) layer_output[n] += attention_output[n];
  return LayerNorm(layer_output, rows, H, w.Get(lp + "output.LayerNorm.weight", {H}),
                   w.Get(lp + "output.LayerNorm.bias", {H}), c.layer_norm_eps);
}

// ConvLayer.forward(hidden_states, residual_states, input_mask).
Vec ConvLayer(const DebertaConfig& c, const Weights& w, const std::string& ep, const Vec& hidden_states,
              const Vec& residual_states, const PaddedBatch& in) {
  const int64_t B = in.batch, L = in.length, H = c.hidden_size;
  const int64_t k = c.conv_kernel_size, groups = c.conv_groups;
  const int64_t per_group = H / groups;  // in and out channels per group
  const int64_t padding = (k - 1) / 2;
  const Tensor& cw = w.Get(ep + "conv.conv.weight", {H, per_group, k});
  const Tensor& cb = w.Get(ep + "conv.conv.bias", {H});
  // out = conv(hidden_states.permute(0, 2, 1)).permute(0, 2, 1): nn.Conv1d is a cross-correlation
  // over zero-padded input; out length = L + 2 * padding - k + 1.
  const int64_t out_len = L + 2 * padding - k + 1;
  if (out_len != L) Fail("ConvLayer: conv output length differs from the input length");
  Vec out(static_cast<size_t>(B * L * H));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t o = 0; o < H; ++o) {
      const int64_t g = o / per_group;
      for (int64_t t = 0; t < out_len; ++t) {
        double s = cb.data[o];
        for (int64_t ci = 0; ci < per_group; ++ci) {
          const int64_t channel = g * per_group + ci;
          for (int64_t kk = 0; kk < k; ++kk) {
            const int64_t src = t + kk - padding;
            if (src < 0 || src >= L) continue;
            s += cw.data[(o * per_group + ci) * k + kk] * hidden_states[(b * L + src) * H + channel];
          }
        }
        out[(b * L + t) * H + o] = s;
      }
    }
  }
  // rmask = (1 - input_mask).bool(); out.masked_fill_(rmask, 0); out = act(dropout(out))
  for (int64_t bt = 0; bt < B * L; ++bt) {
    if (in.attention_mask[bt] == 0) {
      for (int64_t o = 0; o < H; ++o) out[bt * H + o] = 0;
    }
  }
  ApplyActivation(c.conv_act, &out);
  // output = LayerNorm(residual_states + out); output_states = output * input_mask
  Vec layer_norm_input(out.size());
  for (size_t n = 0; n < out.size(); ++n) layer_norm_input[n] = residual_states[n] + out[n];
  Vec output = LayerNorm(layer_norm_input, B * L, H, w.Get(ep + "conv.LayerNorm.weight", {H}),
                         w.Get(ep + "conv.LayerNorm.bias", {H}), c.layer_norm_eps);
  for (int64_t bt = 0; bt < B * L; ++bt) {
    for (int64_t o = 0; o < H; ++o) output[bt * H + o] *= static_cast<double>(in.attention_mask[bt]);
  }
  return output;
}

Outputs DebertaForward(const json& j, const Weights& w, const PaddedBatch& in) {
  const DebertaConfig c(j);
  const bool classification = c.architecture == "DebertaV2ForSequenceClassification";
  if (!classification && c.architecture != "DebertaV2Model" && c.architecture != "DebertaV2ForMaskedLM") {
    Fail("naive reference: unsupported architecture " + c.architecture);
  }
  // from_pretrained: base-model weights under "deberta." when the checkpoint has that prefix.
  const std::string p = w.AnyStartsWith("deberta.") ? "deberta." : "";
  const int64_t B = in.batch, L = in.length, H = c.hidden_size;

  // DebertaV2Model.forward -> DebertaV2Embeddings
  const Vec embedding_output = DebertaEmbeddings(c, w, p, in);

  // DebertaV2Encoder.__init__ / forward
  const std::string ep = p + "encoder.";
  std::vector<std::vector<int64_t>> relative_pos;
  Vec rel_embeddings;
  int64_t rel_rows = 0;
  if (c.relative_attention) {
    const int64_t max_relative_positions =
        c.max_relative_positions < 1 ? c.max_position_embeddings : c.max_relative_positions;
    const int64_t pos_ebd_size = c.position_buckets > 0 ? c.position_buckets * 2 : max_relative_positions * 2;
    rel_rows = pos_ebd_size;
    // get_rel_pos -> build_relative_position(q, k, bucket_size=position_buckets,
    //                                        max_position=max_relative_positions)
    relative_pos = BuildRelativePosition(L, L, c.position_buckets, max_relative_positions);
    // get_rel_embedding: rel_embeddings.weight, LayerNorm'ed when "layer_norm" in norm_rel_ebd
    rel_embeddings = w.Get(ep + "rel_embeddings.weight", {pos_ebd_size, H}).data;
    std::vector<std::string> norm_rel_ebd;
    for (const std::string& x : Split(Lower(c.norm_rel_ebd), '|')) norm_rel_ebd.push_back(Strip(x));
    if (In(norm_rel_ebd, "layer_norm")) {
      rel_embeddings = LayerNorm(rel_embeddings, pos_ebd_size, H, w.Get(ep + "LayerNorm.weight", {H}),
                                 w.Get(ep + "LayerNorm.bias", {H}), c.layer_norm_eps);
    }
  }

  std::vector<Vec> all_hidden_states;
  Vec next_kv = embedding_output;
  Vec output_states = next_kv;
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    all_hidden_states.push_back(output_states);
    output_states = DebertaLayer(c, w, ep + "layer." + std::to_string(i) + ".", next_kv, in, relative_pos,
                                 c.relative_attention ? &rel_embeddings : nullptr, rel_rows);
    if (i == 0 && c.conv_kernel_size > 0) {
      output_states = ConvLayer(c, w, ep, embedding_output, output_states, in);
    }
    next_kv = output_states;
  }
  all_hidden_states.push_back(output_states);

  Outputs out;
  for (size_t i = 0; i < all_hidden_states.size(); ++i) {
    out["hidden_state_" + std::to_string(i)] = Tensor{{B, L, H}, all_hidden_states[i]};
  }
  out["last_hidden_state"] = Tensor{{B, L, H}, output_states};

  if (classification) {
    // ContextPooler: dense(hidden_states[:, 0]) then ACT2FN[pooler_hidden_act]
    const int64_t P = c.pooler_hidden_size;
    Vec context_token(static_cast<size_t>(B * H));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < H; ++k) context_token[b * H + k] = output_states[(b * L) * H + k];
    }
    Vec pooled = Linear(context_token, B, w.Get("pooler.dense.weight", {P, P}), &w.Get("pooler.dense.bias", {P}));
    ApplyActivation(c.pooler_hidden_act, &pooled);
    // classifier = nn.Linear(pooler.output_dim (= hidden_size), num_labels)
    int64_t num_labels = GetInt(j, "num_labels", 2);
    if (HasKey(j, "id2label")) num_labels = static_cast<int64_t>(j.at("id2label").size());
    const Vec logits = Linear(pooled, B, w.Get("classifier.weight", {num_labels, H}),
                              &w.Get("classifier.bias", {num_labels}));
    out["logits"] = Tensor{{B, num_labels}, logits};
  }
  return out;
}

// ---------------------------------------------------------------------------------------------
// T5 encoder (modeling_t5.py).

// T5Config / MT5Config attributes after __init__ (and PretrainedConfig's leftover kwargs).
struct T5Config {
  int64_t vocab_size, d_model, d_kv, d_ff, num_layers, num_heads;
  int64_t relative_attention_num_buckets, relative_attention_max_distance;
  double layer_norm_epsilon;
  std::string feed_forward_proj, dense_act_fn;
  bool is_gated_act;

  explicit T5Config(const json& j) {
    const bool mt5 = GetString(j, "model_type", "t5") == "mt5";
    vocab_size = GetInt(j, "vocab_size", mt5 ? 250112 : 32128);
    d_model = GetInt(j, "d_model", 512);
    d_kv = GetInt(j, "d_kv", 64);
    d_ff = GetInt(j, "d_ff", mt5 ? 1024 : 2048);
    num_layers = GetInt(j, "num_layers", mt5 ? 8 : 6);
    num_heads = GetInt(j, "num_heads", mt5 ? 6 : 8);
    relative_attention_num_buckets = GetInt(j, "relative_attention_num_buckets", 32);
    relative_attention_max_distance = GetInt(j, "relative_attention_max_distance", 128);
    layer_norm_epsilon = GetDouble(j, "layer_norm_epsilon", 1e-6);
    feed_forward_proj = GetString(j, "feed_forward_proj", mt5 ? "gated-gelu" : "relu");
    // act_info = self.feed_forward_proj.split("-")
    const std::vector<std::string> act_info = Split(feed_forward_proj, '-');
    dense_act_fn = act_info.back();
    is_gated_act = act_info.front() == "gated";
    if ((act_info.size() > 1 && act_info.front() != "gated") || act_info.size() > 2) {
      Fail("feed_forward_proj is not a valid activation function of the dense layer");
    }
    if (feed_forward_proj == "gated-gelu") dense_act_fn = "gelu_new";  // backwards compatibility
    // Keys T5Config.__init__ does not take are set afterwards by PretrainedConfig.__init__.
    dense_act_fn = GetString(j, "dense_act_fn", dense_act_fn);
    is_gated_act = GetBool(j, "is_gated_act", is_gated_act);
  }
};

// T5LayerNorm.forward: variance in float32, hidden_states * rsqrt(variance + eps), times weight.
Vec T5LayerNorm(const Vec& x, int64_t rows, int64_t n, const Tensor& weight, double eps) {
  Vec y(x.size());
  for (int64_t r = 0; r < rows; ++r) {
    double sum = 0;
    for (int64_t i = 0; i < n; ++i) {
      const float v = static_cast<float>(x[r * n + i]);  // hidden_states.to(torch.float32)
      sum += static_cast<double>(v * v);
    }
    const float variance = static_cast<float>(sum / static_cast<double>(n));
    const float rsqrt = 1.0f / std::sqrt(variance + static_cast<float>(eps));
    for (int64_t i = 0; i < n; ++i) y[r * n + i] = weight.data[i] * (x[r * n + i] * static_cast<double>(rsqrt));
  }
  return y;
}

Outputs T5Forward(const json& j, const Weights& w, const PaddedBatch& in) {
  const T5Config c(j);
  const int64_t B = in.batch, L = in.length, D = c.d_model, nh = c.num_heads, dk = c.d_kv;
  const int64_t inner = nh * dk, F = c.d_ff, rows = B * L;

  // T5EncoderModel: encoder.embed_tokens is self.shared; either checkpoint name fills it.
  const std::string embed_name = w.Has("encoder.embed_tokens.weight") ? "encoder.embed_tokens.weight" : "shared.weight";
  const Tensor& embed = w.Get(embed_name, {c.vocab_size, D});

  // T5Stack.forward: inputs_embeds = embed_tokens(input_ids)
  Vec hidden_states(static_cast<size_t>(rows * D));
  for (int64_t bt = 0; bt < rows; ++bt) {
    const int64_t id = in.input_ids[bt];
    if (id < 0 || id >= c.vocab_size) Fail("input id out of range");
    for (int64_t k = 0; k < D; ++k) hidden_states[bt * D + k] = embed.data[id * D + k];
  }
  // extended_attention_mask = (1.0 - attention_mask[:, None, None, :]) * finfo(dtype).min
  const double finfo_min = -DBL_MAX;

  // position_bias from block 0 (compute_bias + mask), reused by every block: [B, nh, L, L]
  Vec position_bias;
  std::vector<Vec> all_hidden_states;
  for (int64_t i = 0; i < c.num_layers; ++i) {
    all_hidden_states.push_back(hidden_states);
    const std::string bp = "encoder.block." + std::to_string(i) + ".layer.";

    // T5LayerSelfAttention: normed = layer_norm(h); h = h + SelfAttention(normed)
    const Vec normed = T5LayerNorm(hidden_states, rows, D, w.Get(bp + "0.layer_norm.weight", {D}), c.layer_norm_epsilon);
    const std::string ap = bp + "0.SelfAttention.";
    const Vec q = Linear(normed, rows, w.Get(ap + "q.weight", {inner, D}), nullptr);
    const Vec k = Linear(normed, rows, w.Get(ap + "k.weight", {inner, D}), nullptr);
    const Vec v = Linear(normed, rows, w.Get(ap + "v.weight", {inner, D}), nullptr);
    // .view(B, -1, n_heads, d_kv).transpose(1, 2): element [b, h, t, x] = proj[b, t, h * d_kv + x]
    auto at = [&](const Vec& p, int64_t b, int64_t h, int64_t t, int64_t x) { return p[(b * L + t) * inner + h * dk + x]; };

    if (i == 0) {
      // T5Attention.compute_bias(query_length, key_length) with has_relative_attention_bias
      const Tensor& bias = w.Get(ap + "relative_attention_bias.weight", {c.relative_attention_num_buckets, nh});
      position_bias.assign(static_cast<size_t>(B * nh * L * L), 0.0);
      for (int64_t b = 0; b < B; ++b) {
        for (int64_t h = 0; h < nh; ++h) {
          for (int64_t qp = 0; qp < L; ++qp) {
            for (int64_t kp = 0; kp < L; ++kp) {
              const int64_t relative_position = kp - qp;  // memory_position - context_position
              const int64_t bucket = T5RelativePositionBucket(relative_position, /*bidirectional=*/true,
                                                              c.relative_attention_num_buckets,
                                                              c.relative_attention_max_distance);
              double value = bias.data[bucket * nh + h];
              // position_bias = position_bias + causal_mask (the extended attention mask)
              value += (1.0 - static_cast<double>(in.attention_mask[b * L + kp])) * finfo_min;
              position_bias[((b * nh + h) * L + qp) * L + kp] = value;
            }
          }
        }
      }
    } else if (w.Has(ap + "relative_attention_bias.weight")) {
      Fail("only block 0 has a relative_attention_bias");
    }

    Vec attn_output(static_cast<size_t>(rows * inner));
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t h = 0; h < nh; ++h) {
        for (int64_t qp = 0; qp < L; ++qp) {
          // scores = matmul(query_states, key_states^T) + position_bias (no 1/sqrt(d) scaling)
          Vec scores(static_cast<size_t>(L));
          for (int64_t kp = 0; kp < L; ++kp) {
            double s = 0;
            for (int64_t x = 0; x < dk; ++x) s += at(q, b, h, qp, x) * at(k, b, h, kp, x);
            scores[kp] = s + position_bias[((b * nh + h) * L + qp) * L + kp];
          }
          // attn_weights = softmax(scores.float(), dim=-1).type_as(scores): in float32
          for (double& s : scores) {
            s = s < -static_cast<double>(FLT_MAX) ? -INFINITY : static_cast<double>(static_cast<float>(s));
          }
          SoftmaxRow(scores.data(), L);
          for (double& s : scores) s = static_cast<double>(static_cast<float>(s));
          // attn_output = matmul(attn_weights, value_states).transpose(1, 2).view(B, -1, inner_dim)
          for (int64_t x = 0; x < dk; ++x) {
            double s = 0;
            for (int64_t kp = 0; kp < L; ++kp) s += scores[kp] * at(v, b, h, kp, x);
            attn_output[(b * L + qp) * inner + h * dk + x] = s;
          }
        }
      }
    }
    const Vec o = Linear(attn_output, rows, w.Get(ap + "o.weight", {D, inner}), nullptr);
    for (size_t n = 0; n < hidden_states.size(); ++n) hidden_states[n] += o[n];

    // T5LayerFF: h = h + DenseReluDense(layer_norm(h))
    const Vec forwarded = T5LayerNorm(hidden_states, rows, D, w.Get(bp + "1.layer_norm.weight", {D}), c.layer_norm_epsilon);
    const std::string fp = bp + "1.DenseReluDense.";
    Vec ff;
    if (c.is_gated_act) {
      // T5DenseGatedActDense: wo(act(wi_0(h)) * wi_1(h))
      Vec hidden_gelu = Linear(forwarded, rows, w.Get(fp + "wi_0.weight", {F, D}), nullptr);
      ApplyActivation(c.dense_act_fn, &hidden_gelu);
      const Vec hidden_linear = Linear(forwarded, rows, w.Get(fp + "wi_1.weight", {F, D}), nullptr);
      for (size_t n = 0; n < hidden_gelu.size(); ++n) hidden_gelu[n] *= hidden_linear[n];
      ff = Linear(hidden_gelu, rows, w.Get(fp + "wo.weight", {D, F}), nullptr);
    } else {
      // T5DenseActDense: wo(act(wi(h)))
      Vec h1 = Linear(forwarded, rows, w.Get(fp + "wi.weight", {F, D}), nullptr);
      ApplyActivation(c.dense_act_fn, &h1);
      ff = Linear(h1, rows, w.Get(fp + "wo.weight", {D, F}), nullptr);
    }
    for (size_t n = 0; n < hidden_states.size(); ++n) hidden_states[n] += ff[n];
  }
  // final_layer_norm; the last hidden state appended after the loop is this normed one
  hidden_states = T5LayerNorm(hidden_states, rows, D, w.Get("encoder.final_layer_norm.weight", {D}), c.layer_norm_epsilon);
  all_hidden_states.push_back(hidden_states);

  Outputs out;
  for (size_t i = 0; i < all_hidden_states.size(); ++i) {
    out["hidden_state_" + std::to_string(i)] = Tensor{{B, L, D}, all_hidden_states[i]};
  }
  out["last_hidden_state"] = Tensor{{B, L, D}, hidden_states};
  return out;
}


// ---------------------------------------------------------------------------------------------
// BERT, RoBERTa, XLM-RoBERTa, ELECTRA (modeling_bert.py, modeling_roberta.py,
// modeling_xlm_roberta.py, modeling_electra.py).

struct BertFamilyConfig {
  std::string model_type, architecture;
  int64_t vocab_size, hidden_size, num_hidden_layers, num_attention_heads, intermediate_size;
  std::string hidden_act, position_embedding_type;
  int64_t max_position_embeddings, type_vocab_size, pad_token_id, embedding_size;
  double layer_norm_eps;

  explicit BertFamilyConfig(const json& j) {
    model_type = GetString(j, "model_type", "bert");
    const bool roberta = model_type == "roberta" || model_type == "xlm-roberta";
    const bool electra = model_type == "electra";
    // BertConfig / RobertaConfig / XLMRobertaConfig / ElectraConfig defaults.
    vocab_size = GetInt(j, "vocab_size", 30522);
    hidden_size = GetInt(j, "hidden_size", electra ? 256 : 768);
    num_hidden_layers = GetInt(j, "num_hidden_layers", 12);
    num_attention_heads = GetInt(j, "num_attention_heads", electra ? 4 : 12);
    intermediate_size = GetInt(j, "intermediate_size", electra ? 1024 : 3072);
    hidden_act = GetString(j, "hidden_act", "gelu");
    max_position_embeddings = GetInt(j, "max_position_embeddings", 512);
    type_vocab_size = GetInt(j, "type_vocab_size", 2);
    layer_norm_eps = GetDouble(j, "layer_norm_eps", 1e-12);
    pad_token_id = GetInt(j, "pad_token_id", roberta ? 1 : 0);
    position_embedding_type = GetString(j, "position_embedding_type", "absolute");
    embedding_size = electra ? GetInt(j, "embedding_size", 128) : hidden_size;
    architecture = HasKey(j, "architectures") ? j.at("architectures")[0].get<std::string>() : "";
  }
  bool roberta() const { return model_type == "roberta" || model_type == "xlm-roberta"; }
  bool electra() const { return model_type == "electra"; }
};

// RobertaEmbeddings.create_position_ids_from_input_ids (past_key_values_length 0).
std::vector<int64_t> CreatePositionIdsFromInputIds(const PaddedBatch& in, int64_t padding_idx) {
  std::vector<int64_t> out(in.input_ids.size());
  for (int64_t b = 0; b < in.batch; ++b) {
    int64_t cumsum = 0;
    for (int64_t t = 0; t < in.length; ++t) {
      const int64_t mask = in.input_ids[b * in.length + t] != padding_idx ? 1 : 0;
      cumsum += mask;
      out[b * in.length + t] = cumsum * mask + padding_idx;
    }
  }
  return out;
}

// BertEmbeddings / RobertaEmbeddings / ElectraEmbeddings.forward: [B * L, embedding_size].
Vec BertEmbeddings(const BertFamilyConfig& c, const Weights& w, const std::string& p, const PaddedBatch& in) {
  const int64_t B = in.batch, L = in.length, E = c.embedding_size;
  if (L > c.max_position_embeddings) Fail("sequence longer than max_position_embeddings");
  const std::string ep = p + "embeddings.";
  const Tensor& word = w.Get(ep + "word_embeddings.weight", {c.vocab_size, E});
  const Tensor& position = w.Get(ep + "position_embeddings.weight", {c.max_position_embeddings, E});
  const Tensor& token_type = w.Get(ep + "token_type_embeddings.weight", {c.type_vocab_size, E});
  std::vector<int64_t> position_ids(in.input_ids.size());
  if (c.roberta()) {
    position_ids = CreatePositionIdsFromInputIds(in, c.pad_token_id);
  } else {
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t t = 0; t < L; ++t) position_ids[b * L + t] = t;  // self.position_ids[:, :seq_length]
    }
  }
  Vec x(static_cast<size_t>(B * L * E));
  for (int64_t r = 0; r < B * L; ++r) {
    const int64_t id = in.input_ids[r];
    // token_type_ids default: the all-zeros buffer.
    const int64_t type = in.token_type_ids.empty() ? 0 : in.token_type_ids[r];
    if (id < 0 || id >= c.vocab_size || type < 0 || type >= c.type_vocab_size) Fail("index out of range");
    for (int64_t k = 0; k < E; ++k) {
      // embeddings = inputs_embeds + token_type_embeddings; embeddings += position_embeddings
      double v = word.data[id * E + k] + token_type.data[type * E + k];
      if (c.position_embedding_type == "absolute") {
        const int64_t pos = position_ids[r];
        if (pos < 0 || pos >= c.max_position_embeddings) Fail("position id out of range");
        v += position.data[pos * E + k];
      }
      x[r * E + k] = v;
    }
  }
  return LayerNorm(x, B * L, E, w.Get(ep + "LayerNorm.weight", {E}), w.Get(ep + "LayerNorm.bias", {E}),
                   c.layer_norm_eps);
}

// BertSelfAttention.forward (eager) + BertSelfOutput: hidden [B * L, H].
Vec BertAttention(const BertFamilyConfig& c, const Weights& w, const std::string& lp, const Vec& hidden,
                  const PaddedBatch& in) {
  const int64_t B = in.batch, L = in.length, H = c.hidden_size, heads = c.num_attention_heads;
  const int64_t d = H / heads;  // attention_head_size = int(hidden_size / num_attention_heads)
  const int64_t M = c.max_position_embeddings;
  const std::string sp = lp + "attention.self.";
  const Vec q = Linear(hidden, B * L, w.Get(sp + "query.weight", {H, H}), &w.Get(sp + "query.bias", {H}));
  const Vec k = Linear(hidden, B * L, w.Get(sp + "key.weight", {H, H}), &w.Get(sp + "key.bias", {H}));
  const Vec v = Linear(hidden, B * L, w.Get(sp + "value.weight", {H, H}), &w.Get(sp + "value.bias", {H}));
  const bool relative_key = c.position_embedding_type == "relative_key";
  const bool relative_key_query = c.position_embedding_type == "relative_key_query";
  const Tensor* distance = nullptr;
  if (relative_key || relative_key_query) {
    distance = &w.Get(sp + "distance_embedding.weight", {2 * M - 1, d});
  }
  // get_extended_attention_mask: (1.0 - mask) * torch.finfo(dtype).min
  const double kMin = -DBL_MAX;
  Vec context(static_cast<size_t>(B * L * H));
  std::vector<double> scores(static_cast<size_t>(L));
  for (int64_t b = 0; b < B; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < L; ++i) {
        const double* qi = &q[(b * L + i) * H + h * d];
        for (int64_t j = 0; j < L; ++j) {
          const double* kj = &k[(b * L + j) * H + h * d];
          double s = 0;
          for (int64_t e = 0; e < d; ++e) s += qi[e] * kj[e];
          if (distance != nullptr) {
            // distance = position_ids_l - position_ids_r; distance_embedding(distance + M - 1)
            const int64_t row = i - j + M - 1;
            const double* pe = &distance->data[row * d];
            double qr = 0, kr = 0;
            for (int64_t e = 0; e < d; ++e) {
              qr += qi[e] * pe[e];  // einsum("bhld,lrd->bhlr", query_layer, positional_embedding)
              kr += kj[e] * pe[e];  // einsum("bhrd,lrd->bhlr", key_layer, positional_embedding)
            }
            s += qr;
            if (relative_key_query) s += kr;
          }
          s /= std::sqrt(static_cast<double>(d));
          s += (1.0 - static_cast<double>(in.attention_mask[b * L + j])) * kMin;
          scores[j] = s;
        }
        SoftmaxRow(scores.data(), L);
        for (int64_t e = 0; e < d; ++e) {
          double acc = 0;
          for (int64_t j = 0; j < L; ++j) acc += scores[j] * v[(b * L + j) * H + h * d + e];
          context[(b * L + i) * H + h * d + e] = acc;
        }
      }
    }
  }
  // BertSelfOutput: LayerNorm(dense(hidden_states) + input_tensor)
  const std::string op = lp + "attention.output.";
  Vec out = Linear(context, B * L, w.Get(op + "dense.weight", {H, H}), &w.Get(op + "dense.bias", {H}));
  for (size_t i = 0; i < out.size(); ++i) out[i] += hidden[i];
  return LayerNorm(out, B * L, H, w.Get(op + "LayerNorm.weight", {H}), w.Get(op + "LayerNorm.bias", {H}),
                   c.layer_norm_eps);
}

// BertLayer.forward: attention, then BertIntermediate and BertOutput.
Vec BertLayer(const BertFamilyConfig& c, const Weights& w, const std::string& lp, const Vec& hidden,
              const PaddedBatch& in) {
  const int64_t rows = in.batch * in.length, H = c.hidden_size, I = c.intermediate_size;
  const Vec attention_output = BertAttention(c, w, lp, hidden, in);
  Vec inter = Linear(attention_output, rows, w.Get(lp + "intermediate.dense.weight", {I, H}),
                     &w.Get(lp + "intermediate.dense.bias", {I}));
  ApplyActivation(c.hidden_act, &inter);
  Vec out = Linear(inter, rows, w.Get(lp + "output.dense.weight", {H, I}), &w.Get(lp + "output.dense.bias", {H}));
  for (size_t i = 0; i < out.size(); ++i) out[i] += attention_output[i];
  return LayerNorm(out, rows, H, w.Get(lp + "output.LayerNorm.weight", {H}), w.Get(lp + "output.LayerNorm.bias", {H}),
                   c.layer_norm_eps);
}

Outputs BertForward(const json& j, const Weights& w, const PaddedBatch& in) {
  const BertFamilyConfig c(j);
  const std::string& a = c.architecture;
  const bool classification = a.size() > 25 && a.compare(a.size() - 25, 25, "ForSequenceClassification") == 0;
  const std::string base = c.electra() ? "electra." : c.roberta() ? "roberta." : "bert.";
  const std::string p = w.AnyStartsWith(base) ? base : "";
  const int64_t B = in.batch, L = in.length, H = c.hidden_size, E = c.embedding_size;

  Vec hidden = BertEmbeddings(c, w, p, in);
  // ElectraModel: embeddings_project when embedding_size != hidden_size.
  if (c.electra() && E != H) {
    hidden = Linear(hidden, B * L, w.Get(p + "embeddings_project.weight", {H, E}),
                    &w.Get(p + "embeddings_project.bias", {H}));
  }
  Outputs out;
  out["hidden_state_0"] = Tensor{{B, L, H}, hidden};
  for (int64_t i = 0; i < c.num_hidden_layers; ++i) {
    hidden = BertLayer(c, w, p + "encoder.layer." + std::to_string(i) + ".", hidden, in);
    out["hidden_state_" + std::to_string(i + 1)] = Tensor{{B, L, H}, hidden};
  }
  out["last_hidden_state"] = Tensor{{B, L, H}, hidden};

  if (classification) {
    int64_t num_labels = GetInt(j, "num_labels", 2);
    if (HasKey(j, "id2label")) num_labels = static_cast<int64_t>(j.at("id2label").size());
    Vec first(static_cast<size_t>(B * H));  // features[:, 0, :]
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < H; ++k) first[b * H + k] = hidden[(b * L) * H + k];
    }
    Vec logits;
    if (!c.electra() && !c.roberta()) {
      // BertPooler: tanh(dense(hidden_states[:, 0])); BertForSequenceClassification.classifier
      Vec pooled = Linear(first, B, w.Get(p + "pooler.dense.weight", {H, H}), &w.Get(p + "pooler.dense.bias", {H}));
      ApplyActivation("tanh", &pooled);
      logits = Linear(pooled, B, w.Get("classifier.weight", {num_labels, H}), &w.Get("classifier.bias", {num_labels}));
    } else {
      // RobertaClassificationHead: dense, torch.tanh, out_proj; ElectraClassificationHead:
      // dense, get_activation("gelu"), out_proj.
      Vec x = Linear(first, B, w.Get("classifier.dense.weight", {H, H}), &w.Get("classifier.dense.bias", {H}));
      ApplyActivation(c.electra() ? "gelu" : "tanh", &x);
      logits = Linear(x, B, w.Get("classifier.out_proj.weight", {num_labels, H}),
                      &w.Get("classifier.out_proj.bias", {num_labels}));
    }
    out["logits"] = Tensor{{B, num_labels}, logits};
  }
  return out;
}


}  // namespace

// ---------------------------------------------------------------------------------------------
// activations.py ACT2FN (4.40.2), in float64.
double Activation(const std::string& name, double x) {
  constexpr double kPi = 3.14159265358979323846;
  auto gelu = [](double v) { return 0.5 * v * (1.0 + std::erf(v / std::sqrt(2.0))); };  // nn.functional.gelu
  if (name == "gelu") return gelu(x);                                                      // GELUActivation
  if (name == "gelu_python") return x * 0.5 * (1.0 + std::erf(x / std::sqrt(2.0)));        // _gelu_python
  if (name == "gelu_new") {                                                                // NewGELUActivation
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * std::pow(x, 3.0))));
  }
  if (name == "gelu_pytorch_tanh") {  // PytorchGELUTanh: gelu(x, approximate="tanh")
    return 0.5 * x * (1.0 + std::tanh(std::sqrt(2.0 / kPi) * (x + 0.044715 * x * x * x)));
  }
  if (name == "gelu_accurate") {  // AccurateGELUActivation
    const double precomputed_constant = std::sqrt(2.0 / kPi);
    return 0.5 * x * (1.0 + std::tanh(precomputed_constant * (x + 0.044715 * std::pow(x, 3.0))));
  }
  if (name == "gelu_fast") {  // FastGELUActivation
    return 0.5 * x * (1.0 + std::tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)));
  }
  if (name == "quick_gelu") return x * Sigmoid(1.702 * x);                   // QuickGELUActivation
  if (name == "gelu_10") return std::min(std::max(gelu(x), -10.0), 10.0);   // ClippedGELUActivation(-10, 10)
  if (name == "relu") return std::max(x, 0.0);                              // nn.ReLU
  if (name == "relu2") {                                                    // ReLUSquaredActivation
    const double r = std::max(x, 0.0);
    return r * r;
  }
  if (name == "relu6") return std::min(std::max(x, 0.0), 6.0);              // nn.ReLU6
  if (name == "leaky_relu") return x >= 0 ? x : 0.01 * x;                   // nn.LeakyReLU()
  if (name == "silu" || name == "swish") return x * Sigmoid(x);            // nn.SiLU
  if (name == "mish") {  // x * tanh(softplus(x)), softplus with threshold 20
    const double softplus = x > 20.0 ? x : std::log1p(std::exp(x));
    return x * std::tanh(softplus);
  }
  if (name == "tanh") return std::tanh(x);     // nn.Tanh
  if (name == "sigmoid") return Sigmoid(x);    // nn.Sigmoid
  if (name == "linear") return x;              // LinearActivation
  if (name == "laplace") {                     // LaplaceActivation(mu=0.707107, sigma=0.282095)
    const double v = (x - 0.707107) / (0.282095 * std::sqrt(2.0));
    return 0.5 * (1.0 + std::erf(v));
  }
  throw std::invalid_argument("function " + name + " not found in ACT2FN mapping");
}

// build_relative_position
std::vector<std::vector<int64_t>> BuildRelativePosition(int64_t query_size, int64_t key_size,
                                                        int64_t bucket_size, int64_t max_position) {
  // rel_pos_ids = q_ids[:, None] - k_ids[None, :]
  std::vector<std::vector<int64_t>> rel(static_cast<size_t>(query_size), std::vector<int64_t>(key_size));
  for (int64_t q = 0; q < query_size; ++q) {
    for (int64_t k = 0; k < key_size; ++k) {
      int64_t r = q - k;
      if (bucket_size > 0 && max_position > 0) r = MakeLogBucketPosition(r, bucket_size, max_position);
      rel[q][k] = r;
    }
  }
  return rel;
}

// T5Attention._relative_position_bucket
int64_t T5RelativePositionBucket(int64_t relative_position, bool bidirectional, int64_t num_buckets,
                                 int64_t max_distance) {
  int64_t relative_buckets = 0;
  if (bidirectional) {
    num_buckets /= 2;
    relative_buckets += (relative_position > 0 ? 1 : 0) * num_buckets;
    relative_position = std::llabs(relative_position);
  } else {
    relative_position = -std::min<int64_t>(relative_position, 0);
  }
  const int64_t max_exact = num_buckets / 2;
  const bool is_small = relative_position < max_exact;
  int64_t value;
  if (is_small) {
    value = relative_position;
  } else {
    // max_exact + (log(relative_position.float() / max_exact) / math.log(max_distance / max_exact)
    //              * (num_buckets - max_exact)).to(torch.long): a float32 tensor op with Python
    // float scalars (converted to float32), truncated toward zero.
    const float ratio = static_cast<float>(relative_position) / static_cast<float>(max_exact);
    const float log_ratio = std::log(ratio);
    const float denom = static_cast<float>(std::log(static_cast<double>(max_distance) / static_cast<double>(max_exact)));
    const float scaled = log_ratio / denom * static_cast<float>(num_buckets - max_exact);
    int64_t relative_position_if_large = max_exact + static_cast<int64_t>(scaled);
    relative_position_if_large = std::min<int64_t>(relative_position_if_large, num_buckets - 1);
    value = relative_position_if_large;
  }
  return relative_buckets + value;
}

absl::StatusOr<Outputs> Forward(const std::string& model_dir, const PaddedBatch& batch) {
  try {
    auto j = ReadJsonFile(JoinPath(model_dir, "config.json"));
    if (!j.ok()) return j.status();
    if (batch.input_ids.size() != static_cast<size_t>(batch.batch * batch.length) ||
        batch.attention_mask.size() != batch.input_ids.size() ||
        (!batch.token_type_ids.empty() && batch.token_type_ids.size() != batch.input_ids.size())) {
      return absl::InvalidArgumentError("naive reference: batch sizes disagree");
    }
    const std::string model_type = GetString(*j, "model_type", "");
    if (model_type == "xlnet") return XlnetForward(*j, model_dir, batch);
    const Weights weights(model_dir, "");
    if (model_type == "deberta-v2") return DebertaForward(*j, weights, batch);
    if (model_type == "t5" || model_type == "mt5") return T5Forward(*j, weights, batch);
    if (model_type == "bert" || model_type == "roberta" || model_type == "xlm-roberta" || model_type == "electra") {
      return BertForward(*j, weights, batch);
    }
    if (model_type == "mpnet") return MpnetForward(*j, model_dir, batch);
    return absl::InvalidArgumentError("naive reference: unsupported model_type " + model_type);
  } catch (const std::exception& e) {
    return absl::InternalError(std::string("naive reference: ") + e.what());
  }
}

NamedTensor ToNamedTensor(const std::string& name, const Tensor& t) {
  NamedTensor nt;
  nt.name = name;
  nt.shape = t.shape;
  nt.data.assign(t.data.begin(), t.data.end());
  return nt;
}

}  // namespace relserve::naive
