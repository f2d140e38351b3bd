#include "tests/model/families/xlnet/naive_xlnet.h"

#include <cmath>
#include <cstring>
#include <map>
#include <stdexcept>
#include <vector>

#include "server/checkpoint/safetensors_checkpoint.h"
#include "tests/model/naive_ops.h"

namespace relserve::naive {
namespace {

using nlohmann::json;

[[noreturn]] void Fail(const std::string& what) { throw std::runtime_error("naive XLNet: " + what); }

bool HasKey(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && !it->is_null();
}
bool Present(const json& j, const char* key) { return j.find(key) != j.end(); }
int64_t GetInt(const json& j, const char* key, int64_t def) {
  return HasKey(j, key) ? static_cast<int64_t>(j.at(key).get<double>()) : def;
}

// Python truthiness of a config attribute (None, false, 0 and "" are false).
bool Truthy(const json& v) {
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0;
  if (v.is_string()) return !v.get<std::string>().empty();
  return true;
}

// XLNetConfig.__init__ (configuration_xlnet.py), then PretrainedConfig setting the remaining
// keys through attribute_map.
struct Config {
  std::string architecture = "XLNetModel";
  int64_t vocab_size, d_model, n_layer, n_head, d_head, d_inner;
  std::string ff_activation, attn_type;
  double layer_norm_eps;
  bool bi_data, same_length;
  int64_t clamp_len;
  // SequenceSummary reads these with getattr / hasattr.
  std::string summary_type;
  bool summary_use_proj, summary_proj_to_labels;
  std::string summary_activation;  // "" when falsy
  int64_t num_labels = 2;

  explicit Config(const json& j) {
    if (HasKey(j, "architectures")) architecture = j.at("architectures").at(0).get<std::string>();
    vocab_size = GetInt(j, "vocab_size", 32000);
    d_model = GetInt(j, "d_model", 1024);
    n_layer = GetInt(j, "n_layer", 24);
    n_head = GetInt(j, "n_head", 16);
    d_inner = GetInt(j, "d_inner", 4096);
    if (d_model % n_head != 0) Fail("'d_model % n_head' should be equal to 0");
    if (Present(j, "d_head") && GetInt(j, "d_head", -1) != d_model / n_head) Fail("d_head should equal d_model // n_head");
    d_head = d_model / n_head;
    ff_activation = HasKey(j, "ff_activation") ? j.at("ff_activation").get<std::string>() : "gelu";
    attn_type = HasKey(j, "attn_type") ? j.at("attn_type").get<std::string>() : "bi";
    layer_norm_eps = HasKey(j, "layer_norm_eps") ? j.at("layer_norm_eps").get<double>() : 1e-12;
    bi_data = HasKey(j, "bi_data") && j.at("bi_data").get<bool>();
    clamp_len = GetInt(j, "clamp_len", -1);
    same_length = HasKey(j, "same_length") && j.at("same_length").get<bool>();
    summary_type = HasKey(j, "summary_type") ? j.at("summary_type").get<std::string>() : "last";
    summary_use_proj = Present(j, "summary_use_proj") ? Truthy(j.at("summary_use_proj")) : true;
    summary_proj_to_labels = Present(j, "summary_proj_to_labels") && Truthy(j.at("summary_proj_to_labels"));
    summary_activation = "tanh";
    if (Present(j, "summary_activation")) {
      summary_activation = Truthy(j.at("summary_activation")) ? j.at("summary_activation").get<std::string>() : "";
    }
    // attribute_map: n_token, hidden_size, num_attention_heads, num_hidden_layers (after __init__).
    vocab_size = GetInt(j, "n_token", vocab_size);
    d_model = GetInt(j, "hidden_size", d_model);
    n_head = GetInt(j, "num_attention_heads", n_head);
    n_layer = GetInt(j, "num_hidden_layers", n_layer);
    if (HasKey(j, "id2label")) {
      num_labels = static_cast<int64_t>(j.at("id2label").size());
    } else {
      num_labels = GetInt(j, "num_labels", 2);
    }
    if (d_model % n_head != 0) Fail("The hidden size is not a multiple of the number of attention heads");
  }
};




// XLNetModel.relative_positional_encoding(qlen, klen, bsz) without bi_data: the float32
// table [P, d_model] for pos_seq = arange(beg, end, -1.0).
std::vector<float> RelativePositionalEncoding(const Config& c, int64_t qlen, int64_t klen, int64_t* P) {
  int64_t beg, end;
  if (c.attn_type == "bi") {
    beg = klen, end = -qlen;
  } else if (c.attn_type == "uni") {
    beg = klen, end = -1;
  } else {
    Fail("Unknown `attn_type` " + c.attn_type);
  }
  const int64_t half = (c.d_model + 1) / 2;
  std::vector<float> inv_freq(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k) {
    // 1 / torch.pow(10000, freq_seq / d_model), float32
    const float freq = static_cast<float>(2 * k) / static_cast<float>(c.d_model);
    inv_freq[k] = 1.0f / std::pow(10000.0f, freq);
  }
  *P = beg - end;
  std::vector<float> pe(static_cast<size_t>(*P * 2 * half));
  for (int64_t p = 0; p < *P; ++p) {
    float pos = static_cast<float>(beg - p);
    if (c.clamp_len > 0) pos = std::min(std::max(pos, -static_cast<float>(c.clamp_len)), static_cast<float>(c.clamp_len));
    for (int64_t k = 0; k < half; ++k) {
      const float inp = pos * inv_freq[k];  // einsum("i,d->id")
      pe[p * 2 * half + k] = std::sin(inp);
      pe[p * 2 * half + half + k] = std::cos(inp);
    }
  }
  if (2 * half != c.d_model) Fail("pos_emb width differs from d_model");
  return pe;
}

}  // namespace

Outputs XlnetForward(const json& j, const std::string& model_dir, const PaddedBatch& in) {
  const Config c(j);
  if (c.bi_data) Fail("bi_data makes results depend on the batch split; not ported");
  const Weights w(model_dir, "naive XLNet: ");
  const std::string p = w.Has("transformer.word_embedding.weight") ? "transformer." : "";
  const int64_t B = in.batch, L = in.length, H = c.d_model, N = c.n_head, D = c.d_head, F = c.d_inner;
  const int64_t qlen = L, klen = L;  // mlen = 0
  const double scale = 1.0 / std::pow(static_cast<double>(D), 0.5);

  // Attention mask: create_mask for uni, plus the data mask (1 - attention_mask), as
  // attn_mask[i][j][b] > 0, then non_tgt_mask = (attn_mask - eye) > 0.
  std::vector<double> non_tgt(static_cast<size_t>(qlen * klen * B), 0.0);
  for (int64_t i = 0; i < qlen; ++i) {
    for (int64_t jj = 0; jj < klen; ++jj) {
      double causal = 0;
      if (c.attn_type == "uni") {
        causal = jj > i ? 1.0 : 0.0;                                 // mask.triu_(mlen + 1)
        if (c.same_length && jj < qlen && jj < i) causal += 1.0;     // mask_lo = mask[:, :qlen].tril(-1)
      }
      for (int64_t b = 0; b < B; ++b) {
        const double input_mask = 1.0 - static_cast<double>(in.attention_mask[b * L + jj]);
        const double attn = (causal + input_mask) > 0 ? 1.0 : 0.0;
        non_tgt[(i * klen + jj) * B + b] = (attn - (i == jj ? 1.0 : 0.0)) > 0 ? 1.0 : 0.0;
      }
    }
  }

  // word_embedding(input_ids); output_h, hidden_states[0].
  const Vec& emb = w.Get(p + "word_embedding.weight", {c.vocab_size, H}).data;
  Vec h(static_cast<size_t>(B * L * H));
  for (int64_t bt = 0; bt < B * L; ++bt) {
    const int64_t id = in.input_ids[bt];
    if (id < 0 || id >= c.vocab_size) Fail("input id out of range");
    for (int64_t k = 0; k < H; ++k) h[bt * H + k] = emb[id * H + k];
  }
  const bool has_seg = !in.token_type_ids.empty();

  int64_t P = 0;
  const std::vector<float> pe32 = RelativePositionalEncoding(c, qlen, klen, &P);
  const Vec pos_emb(pe32.begin(), pe32.end());  // r.type(self.r.dtype)

  std::vector<Vec> all_hidden_states{h};
  for (int64_t layer = 0; layer < c.n_layer; ++layer) {
    const std::string a = p + "layer." + std::to_string(layer) + ".rel_attn.";
    const Vec& Wq = w.Get(a + "q", {H, N, D}).data;
    const Vec& Wk = w.Get(a + "k", {H, N, D}).data;
    const Vec& Wv = w.Get(a + "v", {H, N, D}).data;
    const Vec& Wo = w.Get(a + "o", {H, N, D}).data;
    const Vec& Wr = w.Get(a + "r", {H, N, D}).data;
    const Vec& r_w_bias = w.Get(a + "r_w_bias", {N, D}).data;
    const Vec& r_r_bias = w.Get(a + "r_r_bias", {N, D}).data;
    const Vec& r_s_bias = w.Get(a + "r_s_bias", {N, D}).data;
    const Vec& seg_embed = w.Get(a + "seg_embed", {2, N, D}).data;
    // einsum("ibh,hnd->ibnd"): heads of [rows, H] -> [rows, N * D]
    auto heads = [&](const Vec& x, int64_t rows, const Vec& W) {
      Vec y(static_cast<size_t>(rows * N * D), 0.0);
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t hh = 0; hh < H; ++hh) {
          const double xv = x[r * H + hh];
          for (int64_t nd = 0; nd < N * D; ++nd) y[r * N * D + nd] += xv * W[hh * N * D + nd];
        }
      }
      return y;
    };
    const Vec q = heads(h, B * L, Wq), k = heads(h, B * L, Wk), v = heads(h, B * L, Wv);
    const Vec kr = heads(pos_emb, P, Wr);  // k_head_r [P, N, D] (batch-independent)

    Vec attn_vec(static_cast<size_t>(B * L * N * D), 0.0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t n = 0; n < N; ++n) {
        // bd = einsum("ibnd,jbnd->bnij", q_head + r_r_bias, k_head_r): [qlen, P]
        Vec bd(static_cast<size_t>(qlen * P));
        for (int64_t i = 0; i < qlen; ++i) {
          for (int64_t pp = 0; pp < P; ++pp) {
            double s = 0;
            for (int64_t d = 0; d < D; ++d) {
              s += (q[((b * L + i) * N + n) * D + d] + r_r_bias[n * D + d]) * kr[(pp * N + n) * D + d];
            }
            bd[i * P + pp] = s;
          }
        }
        // ef = einsum("ibnd,snd->ibns", q_head + r_s_bias, seg_embed): [qlen, 2]
        Vec ef_s(static_cast<size_t>(qlen * 2), 0.0);
        for (int64_t i = 0; i < qlen && has_seg; ++i) {
          for (int64_t s = 0; s < 2; ++s) {
            double t = 0;
            for (int64_t d = 0; d < D; ++d) {
              t += (q[((b * L + i) * N + n) * D + d] + r_s_bias[n * D + d]) * seg_embed[(s * N + n) * D + d];
            }
            ef_s[i * 2 + s] = t;
          }
        }
        for (int64_t i = 0; i < qlen; ++i) {
          Vec score(static_cast<size_t>(klen));
          for (int64_t jj = 0; jj < klen; ++jj) {
            // ac = einsum("ibnd,jbnd->bnij", q_head + r_w_bias, k_head_h)
            double ac = 0;
            for (int64_t d = 0; d < D; ++d) {
              ac += (q[((b * L + i) * N + n) * D + d] + r_w_bias[n * D + d]) * k[((b * L + jj) * N + n) * D + d];
            }
            // rel_shift_bnij: reshape [qlen, P] -> [P, qlen], drop row 0, reshape to
            // [qlen, P - 1], keep the first klen columns: element (i, j) is flat entry
            // qlen + i * (P - 1) + j of the [qlen, P] product.
            const int64_t flat = qlen + i * (P - 1) + jj;
            const double bd_ij = bd[(flat / P) * P + flat % P];
            double ef = 0;
            if (has_seg) {
              // seg_mat = one_hot(token_type_ids[:, None] != cat_ids[None, :])
              const int64_t s = in.token_type_ids[b * L + i] != in.token_type_ids[b * L + jj] ? 1 : 0;
              ef = ef_s[i * 2 + s];
            }
            double sc = (ac + bd_ij + ef) * scale;
            sc = sc - 1e30 * non_tgt[(i * klen + jj) * B + b];
            score[jj] = sc;
          }
          double max = score[0];
          for (double s : score) max = std::max(max, s);
          double sum = 0;
          for (double& s : score) sum += (s = std::exp(s - max));
          for (int64_t jj = 0; jj < klen; ++jj) {
            const double prob = score[jj] / sum;
            for (int64_t d = 0; d < D; ++d) {
              attn_vec[((b * L + i) * N + n) * D + d] += prob * v[((b * L + jj) * N + n) * D + d];
            }
          }
        }
      }
    }
    // post_attention: einsum("ibnd,hnd->ibh", attn_vec, o) + h, layer_norm
    Vec attn_out(static_cast<size_t>(B * L * H));
    for (int64_t r = 0; r < B * L; ++r) {
      for (int64_t hh = 0; hh < H; ++hh) {
        double s = 0;
        for (int64_t nd = 0; nd < N * D; ++nd) s += attn_vec[r * N * D + nd] * Wo[hh * N * D + nd];
        attn_out[r * H + hh] = s + h[r * H + hh];
      }
    }
    const Vec output = LayerNorm(attn_out, B * L, H, w.Get(a + "layer_norm.weight", {H}), w.Get(a + "layer_norm.bias", {H}),
                                 c.layer_norm_eps);
    // XLNetFeedForward
    const std::string f = p + "layer." + std::to_string(layer) + ".ff.";
    Vec inner = Linear(output, B * L, w.Get(f + "layer_1.weight", {F, H}), &w.Get(f + "layer_1.bias", {F}));
    for (double& x : inner) x = Activation(c.ff_activation, x);
    Vec ff = Linear(inner, B * L, w.Get(f + "layer_2.weight", {H, F}), &w.Get(f + "layer_2.bias", {H}));
    for (size_t n = 0; n < ff.size(); ++n) ff[n] += output[n];
    h = LayerNorm(ff, B * L, H, w.Get(f + "layer_norm.weight", {H}), w.Get(f + "layer_norm.bias", {H}), c.layer_norm_eps);
    all_hidden_states.push_back(h);
  }

  Outputs out;
  for (size_t i = 0; i < all_hidden_states.size(); ++i) {
    out["hidden_state_" + std::to_string(i)] = Tensor{{B, L, H}, all_hidden_states[i]};
  }
  out["last_hidden_state"] = Tensor{{B, L, H}, h};

  if (c.architecture == "XLNetForSequenceClassification") {
    // SequenceSummary.forward
    Vec summary(static_cast<size_t>(B * H), 0.0);
    for (int64_t b = 0; b < B; ++b) {
      for (int64_t k = 0; k < H; ++k) {
        double value = 0;
        if (c.summary_type == "last" || c.summary_type == "cls_index") {  // cls_index None: the last token
          value = h[(b * L + L - 1) * H + k];
        } else if (c.summary_type == "first") {
          value = h[(b * L) * H + k];
        } else if (c.summary_type == "mean") {
          for (int64_t t = 0; t < L; ++t) value += h[(b * L + t) * H + k];
          value /= static_cast<double>(L);
        } else {
          Fail("summary_type " + c.summary_type);
        }
        summary[b * H + k] = value;
      }
    }
    int64_t width = H;
    if (c.summary_use_proj) {
      width = c.summary_proj_to_labels && c.num_labels > 0 ? c.num_labels : H;
      summary = Linear(summary, B, w.Get("sequence_summary.summary.weight", {width, H}),
                       &w.Get("sequence_summary.summary.bias", {width}));
    }
    if (!c.summary_activation.empty()) {
      for (double& x : summary) x = Activation(c.summary_activation, x);
    }
    if (width != H) Fail("logits_proj takes d_model features");
    const Vec logits = Linear(summary, B, w.Get("logits_proj.weight", {c.num_labels, H}),
                              &w.Get("logits_proj.bias", {c.num_labels}));
    out["logits"] = Tensor{{B, c.num_labels}, logits};
  }
  return out;
}

}  // namespace relserve::naive
