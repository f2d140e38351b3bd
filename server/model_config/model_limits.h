#ifndef RELSERVE_SERVER_MODEL_CONFIG_MODEL_LIMITS_H_
#define RELSERVE_SERVER_MODEL_CONFIG_MODEL_LIMITS_H_

namespace relserve {

// The largest sizes a model directory's config files may give, enforced where config.json and
// the sentence-transformers files are read, before anything is allocated. The checkpoint's
// tensor shapes bound most sizes as well (a size that disagrees with them is an error naming
// both), but a size no tensor holds (the maximum length of a model without absolute position
// embeddings, a label count) would otherwise let a hostile file make relserve allocate toward
// it. Each cap is well above every published encoder of the supported families.

// hidden_size, embedding_size, pooler_hidden_size, attention_head_size, num_attention_heads,
// their product; T5's d_model, d_kv, num_heads and num_heads x d_kv; sentence-transformers
// word_embedding_dimension and Dense in/out_features.
inline constexpr int kMaxModelWidth = 65536;
// intermediate_size, d_ff (t5-11b: 65536).
inline constexpr int kMaxFeedForwardSize = 1 << 20;
// num_hidden_layers, num_layers.
inline constexpr int kMaxLayers = 1024;
// vocab_size, type_vocab_size (mT5: 250112).
inline constexpr int kMaxVocabSize = 1 << 24;
// The longest sequence a model accepts: max_position_embeddings, position_buckets,
// max_relative_positions, conv_kernel_size, relative_attention_num_buckets, and the maximum
// length asked for with --max-length / --max-input-length. Attention costs length squared, and
// the server's warm-up runs the full length. Above the published models (XLM-RoBERTa-based bge-m3
// holds 8194 positions); a length the device cannot hold fails the load as RESOURCE_EXHAUSTED.
inline constexpr int kMaxSequenceLength = 32768;
// num_labels, entries of id2label.
inline constexpr int kMaxLabels = 65536;

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_CONFIG_MODEL_LIMITS_H_
