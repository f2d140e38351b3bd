#ifndef RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_
#define RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "server/tokenizer/descriptor/tokenizer_family.h"
#include "server/tokenizer/descriptor/tokenizer_family_descriptor.h"
#include "server/tokenizer/models/text_model.h"
#include "server/tokenizer/post_processor_template.h"
#include "server/tokenizer/sentencepiece/sentencepiece_module.h"
#include "server/tokenizer/special_tokens.h"
#include "server/tokenizer/truncation.h"

namespace relserve {

class AddedTokens;
class MappedText;
struct TokenizerConfig;
struct TokenizerFiles;
struct TokenizerJson;

struct TokenizeOptions {
  int max_length = 0;    // total length including special tokens; 0 = the tokenizer's default
  bool truncate = true;  // false: over-long input is INVALID_ARGUMENT naming the lengths
  TruncationDirection direction = TruncationDirection::kRight;  // which end of a text is cut
  // Which text of a pair is cut (EncodePair). With kOnlyFirst a second text that leaves no
  // room for any of the first is INVALID_ARGUMENT, as transformers fails then.
  PairTruncation pair_truncation = PairTruncation::kLongestFirst;
  // A text longer than this is tokenized in chunks of about this many bytes, cut at spaces
  // (text_chunks.h), and only as far as the tokens kept need: up to max_length + 1 of them from
  // the end that is kept, so memory and time follow what is kept, not what was sent. The tokens
  // are those of the whole text. 0: every text in one piece.
  size_t chunk_bytes = 16 << 10;
  // Asked between chunks: a status other than OK (a deadline passed, a caller gone) stops the
  // tokenizing with that status. Unset: never stops.
  std::function<absl::Status()> keep_going;
};

struct Encoding {
  std::vector<int32_t> input_ids;
  // 0 for the first text, 1 for the second (DeBERTa, BERT and XLNet pairs; all 0 for T5,
  // MPNet and RoBERTa); XLNet's <cls> is 2; padding has pad_token_type_id().
  std::vector<int32_t> token_type_ids;
  std::vector<int32_t> attention_mask;  // 1, and 0 for padding
  // Byte span [begin, end) in the text the token came from. For SentencePiece a "▁word" piece
  // covers the space before the word, a bare "▁" may cover nothing (begin == end); a token of
  // normalized text (lower-cased, accents stripped) covers the characters it was made from.
  // (0, 0) for the special tokens of the template and for padding.
  std::vector<std::pair<int32_t, int32_t>> offsets;
  // -1 for the template's special tokens and padding, 0 first text, 1 second text (a special
  // token written in a text belongs to that text).
  std::vector<int8_t> sequence_ids;
  bool truncated = false;
  // Length with special tokens before truncation; a lower bound when length_is_lower_bound.
  int32_t untruncated_length = 0;
  // The text was long enough to be cut after reading only the tokens kept (and a few more),
  // so its whole length is not known: untruncated_length is then a lower bound.
  bool length_is_lower_bound = false;
};

// Tokenization with the vocabulary and template of a model family, as transformers 4.40's slow
// tokenizers (DebertaV2Tokenizer, T5Tokenizer, BertTokenizer, MPNetTokenizer, XLNetTokenizer,
// RobertaTokenizer) encode text:
//   DeBERTa, BERT:   [CLS] a [SEP]    and  [CLS] a [SEP] b [SEP]      (token types 0 0 0 / 1 1)
//   MPNet, RoBERTa:  <s> a </s>       and  <s> a </s></s> b </s>      (token types all 0)
//   T5:              a </s>           and  a </s> b </s>              (token types all 0; from
//                                                                      the slow files, no </s>
//                                                                      after a text whose ids end
//                                                                      with it, as T5Tokenizer)
//   XLNet:           a <sep> <cls>    and  a <sep> b <sep> <cls>      (0 0 / 1 1 / 2), padded
//                                                                      on the left
// Special and added tokens written in the text ("[MASK]", "</s>", "<cls>", ...) are those
// tokens, as transformers splits text on them before the vocabulary model sees it, with their
// lstrip/rstrip/single_word behaviour. Immutable after loading, so Encode may run on many
// threads at once.
//
// The factory functions below are the one place that looks the family's descriptor up
// (families/tokenizer_families.h); the tokenizer holds it, and hands it to what it builds.
class Tokenizer {
 public:
  // Loads from a Hugging Face model directory: the family's vocabulary files (see
  // files/tokenizer_files.h) or, where they are missing, tokenizer.json (files/tokenizer_json.h: its
  // vocabulary, normalizer switches, added tokens and post-processor template), plus
  // tokenizer_config.json (do_lower_case, model_max_length, special
  // and added tokens, the family's switches), special_tokens_map.json and added_tokens.json
  // where present. The default max length is model_max_length from those files when they give
  // a usable one, else default_max_length; INVALID_ARGUMENT when neither is positive.
  // NOT_FOUND when the directory or the vocabulary is missing; FAILED_PRECONDITION when the
  // SentencePiece module `sentencepiece` says cannot be found (see
  // sentencepiece/sentencepiece_module.h; each load below takes it the same way).
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Load(const std::string& model_dir,
                                                         TokenizerFamily family,
                                                         int default_max_length,
                                                         const SentencePieceModuleOptions& sentencepiece = {});
  // Loads from the directory's tokenizer.json even where the vocabulary files are there too.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizerJson(
      const std::string& model_dir, TokenizerFamily family, int default_max_length,
      const SentencePieceModuleOptions& sentencepiece = {});
  // Loads a given vocabulary file (a SentencePiece .model, or a WordPiece vocab.txt for BERT
  // and MPNet) with the family's default settings and special tokens; RoBERTa needs its
  // directory. default_max_length must be positive.
  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadModelFile(
      const std::string& path, TokenizerFamily family, int default_max_length,
      const SentencePieceModuleOptions& sentencepiece = {});
  // Whether a model directory holds the family's vocabulary files (files/tokenizer_files.h):
  // without them a model takes token ids only. INVALID_ARGUMENT for a directory (or dangling
  // link) in a file's place.
  static absl::StatusOr<bool> HasFiles(const std::string& model_dir, TokenizerFamily family);
  // The files a family's tokenizer reads, for messages: "spm.model or spiece.model or
  // tokenizer.json" (files/tokenizer_files.h).
  static std::string FilesDescription(TokenizerFamily family);
  // The special tokens of the family's tokenizer class by default (its descriptor's), as
  // `relserve-model create` writes them beside a model.
  static SpecialTokenNames DefaultSpecialTokens(TokenizerFamily family);

  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  ~Tokenizer();

  // INVALID_ARGUMENT for invalid UTF-8 (naming the byte offset), a negative max_length, a
  // max_length too small for the special tokens, or over-long input with truncate == false.
  // Empty text is allowed. NUL bytes are ordinary characters (the unknown token for
  // SentencePiece; dropped by BERT's text cleaning).
  absl::StatusOr<Encoding> Encode(std::string_view text, const TokenizeOptions& opts = {}) const;
  absl::StatusOr<Encoding> EncodePair(std::string_view a, std::string_view b,
                                      const TokenizeOptions& opts = {}) const;
  // A text of many pairs (a rerank query beside each document, a zero-shot premise beside
  // each hypothesis) tokenized once: TokenizeForPairs with the options every EncodePair of it
  // will take, then EncodePair of the results, which equals EncodePair of the texts.
  struct PairText {
    std::vector<TokenSpan> tokens;
    bool complete = true;  // false: only the tokens a pair under these options can keep
    int max_length = 0;
    TruncationDirection cut = TruncationDirection::kRight;
  };
  absl::StatusOr<PairText> TokenizeForPairs(std::string_view text, std::string_view what,
                                            const TokenizeOptions& opts = {}) const;
  absl::StatusOr<Encoding> EncodePair(const PairText& a, const PairText& b,
                                      const TokenizeOptions& opts = {}) const;
  // The ids of the text's tokens without the template's special tokens (transformers'
  // encode(text, add_special_tokens=False)); for DeBERTa and T5, what
  // SentencePieceProcessor.encode(text, out_type=int) returns for text without special tokens.
  absl::StatusOr<std::vector<int32_t>> EncodeRaw(std::string_view text) const;

  // Pads enc to `length` tokens (nothing when it is that long already): pad_id(), token type
  // pad_token_type_id(), attention mask 0, on the right, or on the left for XLNet, as
  // transformers pads a batch. FAILED_PRECONDITION when the tokenizer has no pad token.
  absl::Status Pad(Encoding* enc, int length) const;

  // The vocabulary's size, and ids of added tokens beyond it.
  int vocab_size() const { return vocab_size_; }
  int pad_id() const { return ids_.pad; }
  int unk_id() const { return ids_.unk; }
  int cls_id() const { return ids_.cls; }  // -1 for T5
  int sep_id() const { return ids_.sep; }  // -1 for T5
  // T5's </s>, XLNet's and MPNet's and RoBERTa's eos_token; == sep_id for DeBERTa and BERT.
  int eos_id() const { return ids_.eos; }
  int mask_id() const { return ids_.mask; }  // -1 where the family has none (T5)
  int default_max_length() const { return default_max_length_; }
  TokenizerFamily family() const { return descriptor_->family; }
  // What sets the tokenizer's family apart (descriptor/tokenizer_family_descriptor.h).
  const TokenizerFamilyDescriptor& descriptor() const { return *descriptor_; }
  // Whether text is lower-cased before encoding (do_lower_case): every character as Python's
  // str.lower does, special tokens excepted. Never for T5, whose T5Tokenizer has no such switch.
  bool lower_case() const { return lower_case_; }
  // sentence-transformers' Transformer module with do_lower_case (sentence_bert_config.json):
  // every text lowered as a whole (every character as Python's str.lower does, special tokens
  // written in it included) before anything else, on top of the tokenizer's own settings.
  // Offsets still point into the caller's text. Call before the tokenizer is shared.
  void LowerCaseWholeText() { lower_case_whole_text_ = true; }
  bool lowers_whole_text() const { return lower_case_whole_text_; }
  // XLNet pads on the left, the others on the right.
  bool pads_left() const { return descriptor_->pads_left; }
  int pad_token_type_id() const { return descriptor_->pad_token_type_id; }
  // Special tokens the template adds: DeBERTa, BERT and XLNet 2 (pair 3), MPNet and RoBERTa 2
  // (pair 4), T5 1 (pair 2); what its post-processor says for a tokenizer.json.
  int NumSpecialTokens(bool pair) const;
  // "" for an id outside the vocabulary.
  std::string IdToPiece(int id) const;
  // transformers' convert_tokens_to_ids of one token: an added token's id (its content exactly),
  // else the vocabulary's piece; -1 for a token neither holds (transformers gives unk there).
  int TokenToId(std::string_view token) const;
  // Text from token ids, as the `tokenizers` library's decoder of the family's tokenizer.json
  // writes it (what text-embeddings-inference's /decode answers; token_decoder.cc):
  //   SentencePiece (DeBERTa, T5, XLNet, XLM-RoBERTa): pieces joined, "▁" read as a space, the
  //     first token's leading space dropped, byte pieces (<0x0A>) as their bytes;
  //   WordPiece (BERT, MPNet): tokens joined by spaces, "##" pieces glued to the one before,
  //     " ." " ," " ?" " !" " n't" " 's" ... inside a token cleaned up (WordPiece's cleanup);
  //   byte-level BPE (RoBERTa): pieces mapped back to the bytes they stand for.
  // Added tokens are written as their content. skip_special_tokens drops the special tokens
  // (pad, unk, cls, sep, eos, mask and the added tokens that are special). Bytes that do not
  // form UTF-8 become U+FFFD. INVALID_ARGUMENT naming the position of an id that is neither in
  // the vocabulary nor an added token.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids, bool skip_special_tokens) const;
  // Text from token strings through the same decoder (the fast tokenizer's
  // convert_tokens_to_string): a string that is no token (a piece of the text) is decoded as
  // one would be. Bytes that do not form UTF-8 become U+FFFD.
  std::string DecodeTokens(const std::vector<std::string>& tokens) const;
  // The vocabulary model's continuing_subword_prefix as the fast tokenizer's model has one:
  // "##" for WordPiece (BERT, ELECTRA, MPNet); "" for Unigram (which has none) and for
  // RoBERTa's byte-level BPE (whose converter sets none).
  std::string continuing_subword_prefix() const;
  // The name of the file the vocabulary was read from: "spm.model", "vocab.json",
  // "tokenizer.json"...
  const std::string& source_file() const { return source_file_; }

 private:
  Tokenizer(std::unique_ptr<TextModel> model, const TokenizerFamilyDescriptor& family, SpecialTokenIds ids,
            PostProcessorTemplate post_processor, std::unique_ptr<AddedTokens> added,
            const TokenizerConfig& config, int default_max_length, int vocab_size);

  static absl::StatusOr<std::unique_ptr<Tokenizer>> LoadFiles(const std::string& model_dir,
                                                              const TokenizerFiles& files,
                                                              const TokenizerFamilyDescriptor& family,
                                                              int default_max_length,
                                                              const SentencePieceModuleOptions& sentencepiece);
  static absl::StatusOr<std::unique_ptr<Tokenizer>> Create(const TokenizerFiles& files,
                                                           const TokenizerJson* json,
                                                           const TokenizerFamilyDescriptor& family,
                                                           const TokenizerConfig& config,
                                                           int default_max_length,
                                                           const SentencePieceModuleOptions& sentencepiece);

  // Validates `text` and splits it into tokens: added tokens, and the vocabulary model's
  // tokens of the text between them.
  absl::StatusOr<std::vector<TokenSpan>> Tokens(std::string_view text,
                                                std::string_view what) const;
  // Some of a text's tokens: all of them when there are at most `limit`, else the first
  // `limit` (kRight: the end is cut) or the last `limit` (kLeft) with complete false. Long
  // texts are tokenized chunk by chunk (TokenizeOptions::chunk_bytes), only as far as needed.
  struct TextTokens {
    std::vector<TokenSpan> tokens;
    bool complete = true;
  };
  absl::StatusOr<TextTokens> BoundedTokens(std::string_view text, std::string_view what, size_t limit,
                                           const TokenizeOptions& opts) const;
  absl::StatusOr<int> MaxLength(const TokenizeOptions& opts, bool pair) const;
  Encoding Assemble(const std::vector<TokenSpan>& a, const std::vector<TokenSpan>* b,
                    int max_length, TruncationDirection direction,
                    PairTruncation pair_truncation = PairTruncation::kLongestFirst) const;

  std::unique_ptr<TextModel> model_;
  const TokenizerFamilyDescriptor* descriptor_;
  SpecialTokenIds ids_;
  PostProcessorTemplate template_;
  std::unique_ptr<AddedTokens> added_;
  bool lower_case_;
  // transformers' tokenize-level lower-casing, before the split on added tokens.
  bool lower_case_outside_tokens_;
  bool lower_case_whole_text_ = false;  // LowerCaseWholeText()
  bool add_prefix_space_;  // the descriptor's has_add_prefix_space, and the config's switch
  std::unique_ptr<FamilyTextRules> text_rules_;  // null where the family has none
  // Whether a text may be tokenized in chunks cut at spaces (text_chunks.h): false when an
  // added token or a vocabulary piece spans a space.
  bool chunkable_ = true;
  std::string source_file_;
  int default_max_length_;
  int vocab_size_;
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_TOKENIZER_TOKENIZER_H_
