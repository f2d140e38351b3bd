#include "server/serving/token_classification.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "server/backend/inference_backend.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/field_error.h"

namespace relserve {
namespace {

// Far more tokens than any text can make (texts are capped well below 2^30 bytes).
constexpr int kWholeTextLength = 1 << 30;

void AppendRange(const Encoding& enc, int begin, int end, EncodedInput* out) {
  for (int i = begin; i < end; ++i) {
    out->sequence.input_ids.push_back(enc.input_ids[i]);
    out->sequence.token_type_ids.push_back(enc.token_type_ids[i]);
    out->offsets.push_back(enc.offsets[i]);
    out->special.push_back(enc.sequence_ids[i] < 0);
  }
}

// The text as Python's str sees it: the character (code point) index of every byte offset.
class CharIndex {
 public:
  explicit CharIndex(const std::string& text) : text_(text), chars_(text.size() + 1, 0) {
    int64_t c = 0;
    for (size_t i = 0; i < text.size(); ++i) {
      chars_[i] = c;
      if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) starts_.push_back(i);
      // A byte that starts a character counts it; continuation bytes share it.
      if (i + 1 == text.size() || (static_cast<unsigned char>(text[i + 1]) & 0xC0) != 0x80) ++c;
    }
    chars_[text.size()] = c;
    starts_.push_back(text.size());
  }
  int64_t Char(int32_t byte) const { return chars_[std::clamp<size_t>(byte, 0, text_.size())]; }
  int64_t size() const { return chars_.back(); }
  // sentence[begin:end] in characters.
  std::string Slice(int64_t begin, int64_t end) const {
    begin = std::clamp<int64_t>(begin, 0, size());
    end = std::clamp<int64_t>(end, begin, size());
    return text_.substr(starts_[begin], starts_[end] - starts_[begin]);
  }
  const std::string& text() const { return text_; }
  // Whether character c is an ASCII space.
  bool IsSpace(int64_t c) const { return c >= 0 && c < size() && text_[starts_[c]] == ' '; }

 private:
  const std::string& text_;
  std::vector<int64_t> chars_;  // per byte
  std::vector<size_t> starts_;  // per character, and the end
};

int64_t CodePoints(const std::string& s) {
  int64_t n = 0;
  for (char ch : s) n += (static_cast<unsigned char>(ch) & 0xC0) != 0x80;
  return n;
}

bool IsAsciiSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

size_t Utf8Length(unsigned char lead) { return lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4; }

// Whether the tokenizer's fast twin pre-tokenizes with Metaspace (SentencePiece vocabularies).
bool Metaspace(const Tokenizer& tokenizer) {
  switch (tokenizer.family()) {
    case TokenizerFamily::kDeberta:
    case TokenizerFamily::kT5:
    case TokenizerFamily::kXlnet:
    case TokenizerFamily::kXlmRoberta:
      return true;
    default:
      return false;
  }
}

// A Metaspace token's byte span as the fast tokenizer aligns it, from the span the SentencePiece
// model gives: the "▁" prepended to the text (after the white space its Strip normalizer
// removes) takes the text's first character, so a bare "▁" there covers that character instead
// of nothing; and a "▁" that stands for a run of white space covers the run's last character.
std::pair<int32_t, int32_t> FastMetaspaceSpan(const std::string& text, const std::string& piece,
                                              std::pair<int32_t, int32_t> span) {
  static constexpr char kMetaspace[] = "\xE2\x96\x81";
  if (piece.rfind(kMetaspace, 0) != 0) return span;
  auto [b, e] = span;
  size_t first = 0;
  while (first < text.size() && IsAsciiSpace(text[first])) ++first;
  if (first < text.size() && static_cast<size_t>(b) <= first) {
    b = static_cast<int32_t>(first);
    e = std::max<int32_t>(e, b + static_cast<int32_t>(Utf8Length(static_cast<unsigned char>(text[first]))));
  } else if (b < e && static_cast<size_t>(e) <= text.size()) {
    while (b + 1 < e && IsAsciiSpace(text[b]) && IsAsciiSpace(text[b + 1])) ++b;
  }
  return {b, e};
}

// gather_pre_entities' entry of one token.
struct PreEntity {
  std::string word;
  std::vector<double> scores;
  int64_t start = 0, end = 0;
  int32_t index = 0;
  bool is_subword = false;
};

size_t ArgMax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());  // the first largest, as numpy
}

std::vector<PreEntity> GatherPreEntities(const CharIndex& text, const EncodedInput& window, const std::vector<float>& logits,
                                         size_t labels, const Tokenizer& tokenizer) {
  std::vector<PreEntity> out;
  const std::string prefix = tokenizer.continuing_subword_prefix();
  const bool metaspace = Metaspace(tokenizer);
  const size_t n = window.sequence.input_ids.size();
  for (size_t idx = 0; idx < n; ++idx) {
    if (idx < window.special.size() && window.special[idx]) continue;
    PreEntity e;
    // Softmax of the token's logits, shifted by their largest.
    const float* l = logits.data() + idx * labels;
    const double top = *std::max_element(l, l + labels);
    double sum = 0;
    e.scores.resize(labels);
    for (size_t k = 0; k < labels; ++k) sum += e.scores[k] = std::exp(static_cast<double>(l[k]) - top);
    for (double& s : e.scores) s /= sum;
    const int32_t id = window.sequence.input_ids[idx];
    e.word = tokenizer.IdToPiece(id);
    const std::pair<int32_t, int32_t> span =
        metaspace ? FastMetaspaceSpan(text.text(), e.word, window.offsets[idx]) : window.offsets[idx];
    e.start = text.Char(span.first);
    e.end = text.Char(span.second);
    const std::string word_ref = text.Slice(e.start, e.end);
    if (!prefix.empty()) {
      // A word-aware vocabulary: a continuation's token is longer than its text.
      e.is_subword = CodePoints(e.word) != CodePoints(word_ref);
    } else {
      // The pipeline's fallback: a new word only where a space touches the token's start.
      e.is_subword = e.start > 0 && !text.IsSpace(e.start - 1) && !text.IsSpace(e.start);
    }
    if (id == tokenizer.unk_id()) {
      e.word = word_ref;
      e.is_subword = false;
    }
    e.index = static_cast<int32_t>(idx);
    out.push_back(std::move(e));
  }
  return out;
}

// aggregate_word: one word's tokens as one entity.
TokenEntity AggregateWord(const std::vector<const PreEntity*>& tokens, AggregationStrategy strategy,
                          const std::vector<std::string>& labels, const Tokenizer& tokenizer) {
  std::vector<std::string> words;
  for (const PreEntity* t : tokens) words.push_back(t->word);
  TokenEntity e;
  e.word = tokenizer.DecodeTokens(words);
  std::vector<double> scores;
  if (strategy == AggregationStrategy::kFirst) {
    scores = tokens.front()->scores;
  } else if (strategy == AggregationStrategy::kMax) {
    const PreEntity* best = tokens.front();
    double best_max = *std::max_element(best->scores.begin(), best->scores.end());
    for (const PreEntity* t : tokens) {
      const double m = *std::max_element(t->scores.begin(), t->scores.end());
      if (m > best_max) best = t, best_max = m;
    }
    scores = best->scores;
  } else {  // kAverage
    scores.assign(tokens.front()->scores.size(), 0.0);
    for (const PreEntity* t : tokens) {
      for (size_t k = 0; k < scores.size(); ++k) scores[k] += t->scores[k];
    }
    for (double& s : scores) s /= static_cast<double>(tokens.size());
  }
  const size_t best = ArgMax(scores);
  e.entity = best < labels.size() ? labels[best] : "";
  e.score = scores[best];
  e.start = tokens.front()->start;
  e.end = tokens.back()->end;
  return e;
}

// get_tag: "B-X" and "I-X" name their tag; any other label is an I- of itself.
std::pair<char, std::string> Tag(const std::string& entity) {
  if (entity.rfind("B-", 0) == 0) return {'B', entity.substr(2)};
  if (entity.rfind("I-", 0) == 0) return {'I', entity.substr(2)};
  return {'I', entity};
}

// group_sub_entities: the group's tag is the first entity's label after its last "-".
TokenEntity GroupSubEntities(const std::vector<TokenEntity>& group, const Tokenizer& tokenizer) {
  TokenEntity g;
  const std::string& first = group.front().entity;
  const size_t dash = first.rfind('-');
  g.entity = dash == std::string::npos ? first : first.substr(dash + 1);
  double sum = 0;
  std::vector<std::string> words;
  for (const TokenEntity& e : group) {
    sum += e.score;
    words.push_back(e.word);
  }
  g.score = sum / static_cast<double>(group.size());
  g.word = tokenizer.DecodeTokens(words);
  g.start = group.front().start;
  g.end = group.back().end;
  return g;
}

std::vector<TokenEntity> GroupEntities(const std::vector<TokenEntity>& entities, const Tokenizer& tokenizer) {
  std::vector<TokenEntity> groups, current;
  for (const TokenEntity& e : entities) {
    if (current.empty()) {
      current.push_back(e);
      continue;
    }
    const auto [bi, tag] = Tag(e.entity);
    const auto [last_bi, last_tag] = Tag(current.back().entity);
    (void)last_bi;
    if (tag == last_tag && bi != 'B') {
      current.push_back(e);
    } else {
      groups.push_back(GroupSubEntities(current, tokenizer));
      current = {e};
    }
  }
  if (!current.empty()) groups.push_back(GroupSubEntities(current, tokenizer));
  return groups;
}

std::vector<TokenEntity> Aggregate(const std::vector<PreEntity>& pre, AggregationStrategy strategy,
                                   const std::vector<std::string>& labels, const Tokenizer& tokenizer) {
  std::vector<TokenEntity> entities;
  if (strategy == AggregationStrategy::kNone || strategy == AggregationStrategy::kSimple) {
    for (const PreEntity& p : pre) {
      TokenEntity e;
      const size_t best = ArgMax(p.scores);
      e.entity = best < labels.size() ? labels[best] : "";
      e.score = p.scores[best];
      e.index = p.index;
      e.word = p.word;
      e.start = p.start;
      e.end = p.end;
      entities.push_back(std::move(e));
    }
  } else {
    // aggregate_words: a word is a token and the subword tokens after it.
    std::vector<const PreEntity*> word;
    for (const PreEntity& p : pre) {
      if (!word.empty() && !p.is_subword) {
        entities.push_back(AggregateWord(word, strategy, labels, tokenizer));
        word.clear();
      }
      word.push_back(&p);
    }
    if (!word.empty()) entities.push_back(AggregateWord(word, strategy, labels, tokenizer));
  }
  if (strategy == AggregationStrategy::kNone) return entities;
  return GroupEntities(entities, tokenizer);
}

// aggregate_overlapping_entities: sorted by start; of entities that overlap the one kept, the
// longer wins, then the higher score.
std::vector<TokenEntity> MergeOverlapping(std::vector<TokenEntity> entities) {
  if (entities.empty()) return entities;
  std::stable_sort(entities.begin(), entities.end(),
                   [](const TokenEntity& a, const TokenEntity& b) { return a.start < b.start; });
  std::vector<TokenEntity> out;
  TokenEntity previous = entities.front();
  for (const TokenEntity& e : entities) {
    if (previous.start <= e.start && e.start < previous.end) {
      const int64_t length = e.end - e.start, previous_length = previous.end - previous.start;
      if (length > previous_length || (length == previous_length && e.score > previous.score)) previous = e;
    } else {
      out.push_back(std::move(previous));
      previous = e;
    }
  }
  out.push_back(std::move(previous));
  return out;
}

}  // namespace

absl::StatusOr<AggregationStrategy> ParseAggregationStrategy(const std::string& name, const std::string& field) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (AggregationStrategy s : {AggregationStrategy::kNone, AggregationStrategy::kSimple, AggregationStrategy::kFirst,
                                AggregationStrategy::kAverage, AggregationStrategy::kMax}) {
    if (lower == AggregationStrategyName(s)) return s;
  }
  return FieldError(FieldErrorKind::kInvalid, field,
                    absl::StrCat(field, " \"", name, "\" is not one of none, simple, first, average, max"));
}

const char* AggregationStrategyName(AggregationStrategy strategy) {
  switch (strategy) {
    case AggregationStrategy::kNone: return "none";
    case AggregationStrategy::kSimple: return "simple";
    case AggregationStrategy::kFirst: return "first";
    case AggregationStrategy::kAverage: return "average";
    case AggregationStrategy::kMax: return "max";
  }
  return "none";
}

absl::StatusOr<std::vector<EncodedInput>> EncodeTokenClassificationText(const std::string& text,
                                                                         const std::string& field,
                                                                         const Tokenizer& tokenizer,
                                                                         const InferenceBackend& backend,
                                                                         int max_length, std::optional<int> stride) {
  TokenizeOptions whole;
  whole.max_length = kWholeTextLength;
  whole.truncate = false;
  absl::StatusOr<Encoding> enc = tokenizer.Encode(text, whole);
  if (!enc.ok()) return PrefixFieldError(field, enc.status());
  const int n = static_cast<int>(enc->input_ids.size());
  int first = -1, last = -1;  // the text's own tokens, between the template's
  for (int i = 0; i < n; ++i) {
    if (enc->sequence_ids[i] < 0) continue;
    if (first < 0) first = i;
    last = i;
  }
  const int text_tokens = first < 0 ? 0 : last - first + 1;
  const int specials = n - text_tokens;
  const int room = max_length - specials;
  if (stride.has_value() && (*stride < 0 || *stride >= std::max(room, 1))) {
    return FieldError(FieldErrorKind::kInvalid, "stride",
                      absl::StrCat("stride ", *stride, " is outside [0, ", room, "): less than the ", room,
                                   " text tokens a window of this model holds (", max_length, " tokens, ", specials,
                                   " of them special)"));
  }
  std::vector<EncodedInput> windows;
  if (n <= max_length) {
    EncodedInput one;
    AppendRange(*enc, 0, n, &one);
    if (absl::Status s = backend.Validate(one.sequence); !s.ok()) return PrefixFieldError(field, s);
    windows.push_back(std::move(one));
    return windows;
  }
  if (!stride.has_value()) {
    return FieldError(FieldErrorKind::kTooLong, field, absl::StrCat(
        field, " has ", n, " tokens, more than the model's maximum of ", max_length,
        " (special tokens included); send parameters.stride (0 to ", room - 1,
        ", with an aggregation_strategy other than none) to classify it in overlapping windows"));
  }
  const int step = room - *stride;
  for (int start = 0;; start += step) {
    const int end = std::min(start + room, text_tokens);
    EncodedInput w;
    AppendRange(*enc, 0, first, &w);
    AppendRange(*enc, first + start, first + end, &w);
    AppendRange(*enc, last + 1, n, &w);
    if (absl::Status s = backend.Validate(w.sequence); !s.ok()) {
      return PrefixFieldError(absl::StrCat(field, " window ", windows.size()), s);
    }
    windows.push_back(std::move(w));
    if (end == text_tokens) break;
  }
  return windows;
}

std::vector<TokenEntity> TokenEntities(const std::string& text, const std::vector<EncodedInput>& windows,
                                       const std::vector<const std::vector<float>*>& logits,
                                       const std::vector<std::string>& labels, const Tokenizer& tokenizer,
                                       AggregationStrategy strategy, const std::vector<std::string>& ignore_labels) {
  const CharIndex chars(text);
  std::vector<TokenEntity> all;
  for (size_t w = 0; w < windows.size(); ++w) {
    const std::vector<PreEntity> pre = GatherPreEntities(chars, windows[w], *logits[w], labels.size(), tokenizer);
    for (TokenEntity& e : Aggregate(pre, strategy, labels, tokenizer)) {
      if (std::find(ignore_labels.begin(), ignore_labels.end(), e.entity) == ignore_labels.end()) {
        all.push_back(std::move(e));
      }
    }
  }
  if (windows.size() > 1) all = MergeOverlapping(std::move(all));
  return all;
}

}  // namespace relserve
