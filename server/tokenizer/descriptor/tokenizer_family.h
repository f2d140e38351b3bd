#ifndef RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_H_
#define RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_H_

namespace relserve {

// Which model family's vocabulary files, special tokens and template a tokenizer follows;
// each has a descriptor (tokenizer_family_descriptor.h), filled in under families/.
enum class TokenizerFamily {
  kDeberta,  // DeBERTa-v2/v3, SentencePiece:  [CLS] a [SEP] (b [SEP])
  kT5,       // T5, SentencePiece:              a </s> (b </s>)
  kBert,     // BERT, ELECTRA, WordPiece:       [CLS] a [SEP] (b [SEP])
  kRoberta,  // RoBERTa, byte-level BPE:        <s> a </s> (</s> b </s>)
  kMpnet,    // MPNet, WordPiece:               <s> a </s> (</s> b </s>)
  kXlnet,    // XLNet, SentencePiece:           a <sep> (b <sep>) <cls>, padded on the left
  kXlmRoberta,  // XLM-RoBERTa, SentencePiece with fairseq ids: <s> a </s> (</s> b </s>)
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_DESCRIPTOR_TOKENIZER_FAMILY_H_
