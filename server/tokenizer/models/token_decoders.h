#ifndef RELSERVE_SERVER_TOKENIZER_MODELS_TOKEN_DECODERS_H_
#define RELSERVE_SERVER_TOKENIZER_MODELS_TOKEN_DECODERS_H_

#include <string>
#include <vector>

namespace relserve {

// The `tokenizers` library's decoders, tokens to text (Tokenizer::Decode; each family's
// descriptor names its own). The result may hold bytes that are not UTF-8.

// Metaspace with ByteFallback (SentencePiece families): "▁" is a space, the first token loses
// one leading space, <0xXX> pieces are their bytes.
std::string DecodeMetaspace(const std::vector<std::string>& tokens);
// WordPiece with cleanup (BERT, MPNet): tokens joined by spaces, "##" pieces glued on.
std::string DecodeWordPiece(const std::vector<std::string>& tokens);
// ByteLevel (RoBERTa): each token's characters back to the bytes they stand for.
std::string DecodeByteLevel(const std::vector<std::string>& tokens);

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_MODELS_TOKEN_DECODERS_H_
