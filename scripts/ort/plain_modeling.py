"""DeBERTa-v2/v3 and T5 encoder backbones in plain PyTorch, for scripts/ort/export_onnx.py where no
transformers v4.40.2 checkout is at hand (ORT_MODELING=plain in scripts/bench-ort.sh).

Written from what transformers 4.40.2's DebertaV2Model and T5EncoderModel compute, operation for
operation in the order that code runs them (so that torch.onnx.export traces the same kind of graph:
one bmm per product, gathers for DeBERTa's relative terms, a masked softmax), with the same
parameter names, so a checkpoint loads strictly. Eval mode only: no dropout. What it covers: the
configurations relserve-model create writes and the common checkpoints (DeBERTa-v3: relative
attention with log buckets, shared attention keys, c2p and p2c, layer-normed relative embeddings,
no absolute positions; DeBERTa-v2's conv layer and absolute positions are refused). Checked against
transformers' own answers in tests/data/reference (`export_onnx.py --check-reference`), which
bench-ort.sh runs before every export made with it.
"""
import math

import torch
from torch import nn


class Config:
    """config.json as attributes, with transformers' defaults for the keys a directory leaves out."""

    DEFAULTS = {
        "deberta-v2": {"layer_norm_eps": 1e-7, "relative_attention": False, "max_relative_positions": -1,
                       "position_buckets": -1, "share_att_key": False, "pos_att_type": None,
                       "norm_rel_ebd": "none", "position_biased_input": True, "type_vocab_size": 0,
                       "conv_kernel_size": 0, "hidden_act": "gelu", "pad_token_id": 0,
                       "max_position_embeddings": 512},
        "t5": {"layer_norm_epsilon": 1e-6, "relative_attention_num_buckets": 32,
               "relative_attention_max_distance": 128, "feed_forward_proj": "relu", "pad_token_id": 0},
    }

    def __init__(self, values):
        for k, v in self.DEFAULTS.get(values.get("model_type"), {}).items():
            setattr(self, k, v)
        for k, v in values.items():
            setattr(self, k, v)


def _log_bucket_position(relative_pos, bucket_size, max_position):
    sign = torch.sign(relative_pos)
    mid = bucket_size // 2
    abs_pos = torch.where((relative_pos < mid) & (relative_pos > -mid),
                          torch.tensor(mid - 1).type_as(relative_pos), torch.abs(relative_pos))
    log_pos = torch.ceil(torch.log(abs_pos / mid) / torch.log(torch.tensor((max_position - 1) / mid)) * (mid - 1)) + mid
    return torch.where(abs_pos <= mid, relative_pos.type_as(log_pos), log_pos * sign)


def _relative_position(query_size, key_size, bucket_size, max_position, device):
    q_ids = torch.arange(0, query_size, device=device)
    k_ids = torch.arange(0, key_size, device=device)
    rel = q_ids[:, None] - k_ids[None, :]
    if bucket_size > 0 and max_position > 0:
        rel = _log_bucket_position(rel, bucket_size, max_position)
    rel = rel.to(torch.long)
    return rel[:query_size, :].unsqueeze(0)


class DebertaSelfAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.heads = c.num_attention_heads
        self.head_size = c.hidden_size // c.num_attention_heads
        all_head = self.heads * self.head_size
        self.query_proj = nn.Linear(c.hidden_size, all_head)
        self.key_proj = nn.Linear(c.hidden_size, all_head)
        self.value_proj = nn.Linear(c.hidden_size, all_head)
        self.share_att_key = c.share_att_key
        self.pos_att_type = list(c.pos_att_type or [])
        self.position_buckets = c.position_buckets
        self.max_relative_positions = c.max_relative_positions
        if self.max_relative_positions < 1:
            self.max_relative_positions = c.max_position_embeddings
        self.pos_ebd_size = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
        if not self.share_att_key:
            if "c2p" in self.pos_att_type:
                self.pos_key_proj = nn.Linear(c.hidden_size, all_head)
            if "p2c" in self.pos_att_type:
                self.pos_query_proj = nn.Linear(c.hidden_size, all_head)

    def split(self, x):
        new_shape = x.size()[:-1] + (self.heads, -1)
        x = x.view(new_shape)
        return x.permute(0, 2, 1, 3).contiguous().view(-1, x.size(1), x.size(-1))

    def forward(self, hidden, mask, relative_pos, rel_embeddings):
        query = self.split(self.query_proj(hidden))
        key = self.split(self.key_proj(hidden))
        value = self.split(self.value_proj(hidden))
        scale_factor = 1 + len(self.pos_att_type)
        scale = torch.sqrt(torch.tensor(query.size(-1), dtype=torch.float) * scale_factor)
        scores = torch.bmm(query, key.transpose(-1, -2) / scale.to(dtype=query.dtype))
        scores = scores + self.relative_terms(query, key, relative_pos, rel_embeddings, scale_factor)
        scores = scores.view(-1, self.heads, scores.size(-2), scores.size(-1))
        # transformers' XSoftmax: masked positions out of the softmax, and zero after it.
        rmask = ~(mask.to(torch.bool))
        probs = scores.masked_fill(rmask, torch.tensor(torch.finfo(scores.dtype).min))
        probs = torch.softmax(probs, -1)
        probs = probs.masked_fill(rmask, 0)
        context = torch.bmm(probs.view(-1, probs.size(-2), probs.size(-1)), value)
        context = context.view(-1, self.heads, context.size(-2), context.size(-1)).permute(0, 2, 1, 3).contiguous()
        return context.view(context.size()[:-2] + (-1,))

    def relative_terms(self, query, key, relative_pos, rel_embeddings, scale_factor):
        att_span = self.pos_ebd_size
        rel_embeddings = rel_embeddings[0:att_span * 2, :].unsqueeze(0)
        repeat = query.size(0) // self.heads
        if self.share_att_key:
            pos_query = self.split(self.query_proj(rel_embeddings)).repeat(repeat, 1, 1)
            pos_key = self.split(self.key_proj(rel_embeddings)).repeat(repeat, 1, 1)
        else:
            if "c2p" in self.pos_att_type:
                pos_key = self.split(self.pos_key_proj(rel_embeddings)).repeat(repeat, 1, 1)
            if "p2c" in self.pos_att_type:
                pos_query = self.split(self.pos_query_proj(rel_embeddings)).repeat(repeat, 1, 1)
        score = 0
        if "c2p" in self.pos_att_type:
            scale = torch.sqrt(torch.tensor(pos_key.size(-1), dtype=torch.float) * scale_factor)
            c2p = torch.bmm(query, pos_key.transpose(-1, -2))
            c2p_pos = torch.clamp(relative_pos + att_span, 0, att_span * 2 - 1)
            c2p = torch.gather(c2p, dim=-1,
                               index=c2p_pos.squeeze(0).expand([query.size(0), query.size(1), relative_pos.size(-1)]))
            score += c2p / scale.to(dtype=c2p.dtype)
        if "p2c" in self.pos_att_type:
            scale = torch.sqrt(torch.tensor(pos_query.size(-1), dtype=torch.float) * scale_factor)
            p2c_pos = torch.clamp(-relative_pos + att_span, 0, att_span * 2 - 1)
            p2c = torch.bmm(key, pos_query.transpose(-1, -2))
            p2c = torch.gather(p2c, dim=-1,
                               index=p2c_pos.squeeze(0).expand([query.size(0), key.size(-2), key.size(-2)])).transpose(-1, -2)
            score += p2c / scale.to(dtype=p2c.dtype)
        return score


class DebertaDenseNorm(nn.Module):
    """dense, then LayerNorm over (its output + the residual): the attention's and the layer's output."""

    def __init__(self, n_in, n_out, eps):
        super().__init__()
        self.dense = nn.Linear(n_in, n_out)
        self.LayerNorm = nn.LayerNorm(n_out, eps)

    def forward(self, x, residual):
        return self.LayerNorm(self.dense(x) + residual)


class DebertaAttention(nn.Module):
    def __init__(self, c):
        super().__init__()
        setattr(self, "self", DebertaSelfAttention(c))
        self.output = DebertaDenseNorm(c.hidden_size, c.hidden_size, c.layer_norm_eps)

    def forward(self, hidden, mask, relative_pos, rel_embeddings):
        return self.output(getattr(self, "self")(hidden, mask, relative_pos, rel_embeddings), hidden)


class DebertaIntermediate(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.dense = nn.Linear(c.hidden_size, c.intermediate_size)

    def forward(self, x):
        return nn.functional.gelu(self.dense(x))


class DebertaLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.attention = DebertaAttention(c)
        self.intermediate = DebertaIntermediate(c)
        self.output = DebertaDenseNorm(c.intermediate_size, c.hidden_size, c.layer_norm_eps)

    def forward(self, hidden, mask, relative_pos, rel_embeddings):
        attention = self.attention(hidden, mask, relative_pos, rel_embeddings)
        return self.output(self.intermediate(attention), attention)


class DebertaEmbeddings(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.word_embeddings = nn.Embedding(c.vocab_size, c.hidden_size, padding_idx=c.pad_token_id)
        self.LayerNorm = nn.LayerNorm(c.hidden_size, c.layer_norm_eps)

    def forward(self, input_ids, mask):
        embeddings = self.LayerNorm(self.word_embeddings(input_ids))
        return embeddings * mask.unsqueeze(2).to(embeddings.dtype)


class DebertaEncoder(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.layer = nn.ModuleList([DebertaLayer(c) for _ in range(c.num_hidden_layers)])
        self.position_buckets = c.position_buckets
        self.max_relative_positions = c.max_relative_positions
        if self.max_relative_positions < 1:
            self.max_relative_positions = c.max_position_embeddings
        pos_ebd_size = self.position_buckets if self.position_buckets > 0 else self.max_relative_positions
        self.rel_embeddings = nn.Embedding(pos_ebd_size * 2, c.hidden_size)
        self.layer_norm_rel = "layer_norm" in [x.strip() for x in c.norm_rel_ebd.lower().split("|")]
        if self.layer_norm_rel:
            self.LayerNorm = nn.LayerNorm(c.hidden_size, c.layer_norm_eps, elementwise_affine=True)

    def forward(self, hidden, input_mask):
        extended = input_mask.unsqueeze(1).unsqueeze(2)
        mask = extended * extended.squeeze(-2).unsqueeze(-1)
        relative_pos = _relative_position(hidden.size(-2), hidden.size(-2), self.position_buckets,
                                          self.max_relative_positions, hidden.device)
        rel_embeddings = self.rel_embeddings.weight
        if self.layer_norm_rel:
            rel_embeddings = self.LayerNorm(rel_embeddings)
        for layer in self.layer:
            hidden = layer(hidden, mask, relative_pos, rel_embeddings)
        return hidden


class DebertaV2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        if not c.relative_attention or c.position_biased_input or c.conv_kernel_size or c.type_vocab_size:
            raise ValueError("plain_modeling's DeBERTa covers DeBERTa-v3's layout only (relative attention, "
                             "no absolute positions, no token types, no conv layer)")
        if getattr(c, "embedding_size", c.hidden_size) != c.hidden_size:
            raise ValueError("plain_modeling's DeBERTa has no embed_proj (embedding_size != hidden_size)")
        if c.hidden_act != "gelu":
            raise ValueError(f"plain_modeling's DeBERTa runs gelu, not {c.hidden_act}")
        self.embeddings = DebertaEmbeddings(c)
        self.encoder = DebertaEncoder(c)

    def forward(self, input_ids, attention_mask):
        return self.encoder(self.embeddings(input_ids, attention_mask), attention_mask)


class T5LayerNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        variance = x.to(torch.float32).pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


class T5Attention(nn.Module):
    def __init__(self, c, has_bias):
        super().__init__()
        self.heads = c.num_heads
        self.d_kv = c.d_kv
        inner = c.num_heads * c.d_kv
        self.q = nn.Linear(c.d_model, inner, bias=False)
        self.k = nn.Linear(c.d_model, inner, bias=False)
        self.v = nn.Linear(c.d_model, inner, bias=False)
        self.o = nn.Linear(inner, c.d_model, bias=False)
        self.num_buckets = c.relative_attention_num_buckets
        self.max_distance = c.relative_attention_max_distance
        if has_bias:
            self.relative_attention_bias = nn.Embedding(self.num_buckets, self.heads)

    def bucket(self, relative_position):
        num_buckets = self.num_buckets // 2
        buckets = (relative_position > 0).to(torch.long) * num_buckets
        relative_position = torch.abs(relative_position)
        max_exact = num_buckets // 2
        is_small = relative_position < max_exact
        large = max_exact + (torch.log(relative_position.float() / max_exact) / math.log(self.max_distance / max_exact)
                             * (num_buckets - max_exact)).to(torch.long)
        large = torch.min(large, torch.full_like(large, num_buckets - 1))
        return buckets + torch.where(is_small, relative_position, large)

    def position_bias(self, length, device):
        context = torch.arange(length, dtype=torch.long, device=device)[:, None]
        memory = torch.arange(length, dtype=torch.long, device=device)[None, :]
        values = self.relative_attention_bias(self.bucket(memory - context))
        return values.permute([2, 0, 1]).unsqueeze(0)

    def forward(self, hidden, bias):
        batch, length = hidden.shape[:2]

        def shape(x):
            return x.view(batch, -1, self.heads, self.d_kv).transpose(1, 2)

        q, k, v = shape(self.q(hidden)), shape(self.k(hidden)), shape(self.v(hidden))
        scores = torch.matmul(q, k.transpose(3, 2)) + bias
        weights = nn.functional.softmax(scores.float(), dim=-1).type_as(scores)
        context = torch.matmul(weights, v).transpose(1, 2).contiguous().view(batch, -1, self.heads * self.d_kv)
        return self.o(context)


class T5SelfAttentionLayer(nn.Module):
    def __init__(self, c, has_bias):
        super().__init__()
        self.SelfAttention = T5Attention(c, has_bias)
        self.layer_norm = T5LayerNorm(c.d_model, c.layer_norm_epsilon)

    def forward(self, hidden, bias):
        return hidden + self.SelfAttention(self.layer_norm(hidden), bias)


class T5DenseReluDense(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.wi = nn.Linear(c.d_model, c.d_ff, bias=False)
        self.wo = nn.Linear(c.d_ff, c.d_model, bias=False)

    def forward(self, x):
        return self.wo(nn.functional.relu(self.wi(x)))


class T5FeedForwardLayer(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.DenseReluDense = T5DenseReluDense(c)
        self.layer_norm = T5LayerNorm(c.d_model, c.layer_norm_epsilon)

    def forward(self, hidden):
        return hidden + self.DenseReluDense(self.layer_norm(hidden))


class T5Block(nn.Module):
    def __init__(self, c, has_bias):
        super().__init__()
        self.layer = nn.ModuleList([T5SelfAttentionLayer(c, has_bias), T5FeedForwardLayer(c)])

    def forward(self, hidden, bias):
        return self.layer[1](self.layer[0](hidden, bias))


class T5Stack(nn.Module):
    def __init__(self, c, shared):
        super().__init__()
        self.embed_tokens = shared
        self.block = nn.ModuleList([T5Block(c, i == 0) for i in range(c.num_layers)])
        self.final_layer_norm = T5LayerNorm(c.d_model, c.layer_norm_epsilon)

    def forward(self, input_ids, attention_mask):
        hidden = self.embed_tokens(input_ids)
        extended = (1.0 - attention_mask[:, None, None, :].to(hidden.dtype)) * torch.finfo(hidden.dtype).min
        bias = self.block[0].layer[0].SelfAttention.position_bias(input_ids.size(1), input_ids.device) + extended
        for block in self.block:
            hidden = block(hidden, bias)
        return self.final_layer_norm(hidden)


class T5EncoderModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        if c.feed_forward_proj != "relu":
            raise ValueError(f"plain_modeling's T5 runs the relu feed-forward (T5 v1.0), not {c.feed_forward_proj}")
        self.shared = nn.Embedding(c.vocab_size, c.d_model)
        self.encoder = T5Stack(c, self.shared)

    def forward(self, input_ids, attention_mask):
        return self.encoder(input_ids, attention_mask)
