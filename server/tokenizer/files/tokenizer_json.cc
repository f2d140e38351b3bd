#include "server/tokenizer/files/tokenizer_json.h"

#include <limits>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "server/util/file_util.h"
#include "server/util/json_util.h"
#include "server/util/status_macros.h"

namespace relserve {
namespace {

using json = nlohmann::json;

// Ids up to 2^24: far beyond any vocabulary, small enough that a bad file cannot make the
// tokenizer allocate a table of billions of entries.
constexpr int64_t kMaxId = int64_t{1} << 24;

// The place of a component in the file, for messages: "<source>: normalizer.normalizers[1]".
struct Where {
  const std::string& source;
  std::string path;

  Where Child(const std::string& key) const { return Where{source, absl::StrCat(path, ".", key)}; }
  Where Index(size_t i) const { return Where{source, absl::StrCat(path, "[", i, "]")}; }
  std::string Name() const { return absl::StrCat(source, ": ", path); }
  absl::Status Error(const std::string& problem) const {
    return absl::InvalidArgumentError(absl::StrCat(Name(), " ", problem));
  }
};

absl::StatusOr<std::string> TypeOf(const json& object, const Where& where) {
  if (!object.is_object()) {
    return where.Error(absl::StrCat("must be an object, got ", JsonValueForMessage(object)));
  }
  auto it = object.find("type");
  if (it == object.end() || !it->is_string()) {
    return where.Error("has no \"type\" string");
  }
  return it->get<std::string>();
}

absl::Status Unsupported(const Where& where, const std::string& type, const char* supported) {
  return where.Error(absl::StrCat("is a ", type, ", which relserve does not support (supported: ",
                                  supported, ")"));
}

absl::StatusOr<const json*> Required(const json& object, const char* key, const Where& where) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return where.Error(absl::StrCat("has no \"", key, "\""));
  return &*it;
}

// A Replace normalizer's pattern: {"String": s} or {"Regex": r}.
absl::Status ParseReplace(const json& node, const Where& where, TokenizerJson* out) {
  ASSIGN_OR_RETURN(const json* pattern, Required(node, "pattern", where));
  std::string content;
  RETURN_IF_ERROR(JsonFieldReader(node, where.Name()).String("content", &content));
  std::string string_pattern;
  std::string regex_pattern;
  const JsonFieldReader reader(*pattern, where.Child("pattern").Name());
  RETURN_IF_ERROR(reader.String("String", &string_pattern));
  RETURN_IF_ERROR(reader.String("Regex", &regex_pattern));
  if (regex_pattern == " {2,}" && (content == " " || content == "\xe2\x96\x81")) {
    out->collapse_spaces = true;  // what SentencePiece's remove_extra_whitespaces does
    return absl::OkStatus();
  }
  if ((string_pattern == "``" || string_pattern == "''") && content == "\"") {
    out->replace_quotes = true;  // XLNetTokenizer.preprocess_text
    return absl::OkStatus();
  }
  return where.Error(absl::StrCat(
      "replaces ", JsonValueForMessage(*pattern), " by \"", content, "\"",
      ", which relserve does not support (supported: \" {2,}\" by a space, `` and '' by \")"));
}

absl::Status ParseNormalizer(const json& node, const Where& where, TokenizerJson* out) {
  if (node.is_null()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string type, TypeOf(node, where));
  const JsonFieldReader reader(node, where.Name());
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const json* list, Required(node, "normalizers", where));
    if (!list->is_array()) return where.Child("normalizers").Error("must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ParseNormalizer((*list)[i], where.Child("normalizers").Index(i), out));
    }
    return absl::OkStatus();
  }
  out->components.push_back({where.path, type});
  if (type == "Lowercase") {
    out->lowercase = true;
    return absl::OkStatus();
  }
  if (type == "Strip") return absl::OkStatus();  // the slow tokenizers strip the text too
  if (type == "NFKD" || type == "StripAccents") {
    // XLNet without keep_accents: unicodedata.normalize("NFKD") then drop combining marks.
    out->nfkd_strip_accents = true;
    return absl::OkStatus();
  }
  if (type == "Replace") return ParseReplace(node, where, out);
  if (type == "Precompiled") {
    std::string encoded;
    RETURN_IF_ERROR(reader.String("precompiled_charsmap", &encoded));
    if (!absl::Base64Unescape(encoded, &out->precompiled_charsmap)) {
      return where.Error("has a precompiled_charsmap that is not base64");
    }
    return absl::OkStatus();
  }
  if (type == "BertNormalizer") {
    bool clean_text = true;
    RETURN_IF_ERROR(reader.Bool("clean_text", &clean_text));
    if (!clean_text) {
      return where.Error("has clean_text false, which relserve does not support (BertTokenizer "
                         "always cleans the text)");
    }
    RETURN_IF_ERROR(reader.Bool("handle_chinese_chars", &out->handle_chinese_chars));
    RETURN_IF_ERROR(reader.Bool("lowercase", &out->lowercase));
    if (reader.Has("strip_accents")) {
      bool strip = false;
      RETURN_IF_ERROR(reader.Bool("strip_accents", &strip));
      out->strip_accents = strip;
    }
    return absl::OkStatus();
  }
  return Unsupported(where, type,
                     "Sequence, Lowercase, Strip, Precompiled, NFKD, StripAccents, Replace, "
                     "BertNormalizer");
}

absl::Status ParsePreTokenizer(const json& node, const Where& where, TokenizerJson* out) {
  if (node.is_null()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string type, TypeOf(node, where));
  const JsonFieldReader reader(node, where.Name());
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const json* list, Required(node, "pretokenizers", where));
    if (!list->is_array()) return where.Child("pretokenizers").Error("must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ParsePreTokenizer((*list)[i], where.Child("pretokenizers").Index(i), out));
    }
    return absl::OkStatus();
  }
  out->components.push_back({where.path, type});
  if (type == "Metaspace") {
    std::string replacement = "\xe2\x96\x81";
    RETURN_IF_ERROR(reader.String("replacement", &replacement));
    if (replacement != "\xe2\x96\x81") {
      return where.Error(absl::StrCat("replaces spaces by \"", replacement,
                                      "\"; SentencePiece models use \"\xe2\x96\x81\""));
    }
    out->metaspace = true;
    if (reader.Has("prepend_scheme")) {
      RETURN_IF_ERROR(reader.String("prepend_scheme", &out->prepend_scheme));
      if (out->prepend_scheme != "always" && out->prepend_scheme != "first" &&
          out->prepend_scheme != "never") {
        return where.Error(absl::StrCat("has prepend_scheme \"", out->prepend_scheme,
                                        "\"; known: always, first, never"));
      }
    } else {
      // Files of tokenizers before 0.15 say add_prefix_space.
      bool add_prefix_space = true;
      RETURN_IF_ERROR(reader.Bool("add_prefix_space", &add_prefix_space));
      out->prepend_scheme = add_prefix_space ? "always" : "never";
    }
    return absl::OkStatus();
  }
  if (type == "WhitespaceSplit") {
    // Files of tokenizers before 0.15 split words apart instead of folding runs of spaces:
    // the same as SentencePiece's remove_extra_whitespaces.
    out->collapse_spaces = true;
    return absl::OkStatus();
  }
  if (type == "Punctuation") {
    std::string behavior = "Isolated";
    RETURN_IF_ERROR(reader.String("behavior", &behavior));
    if (behavior != "Isolated") {
      return where.Error(absl::StrCat("has behavior \"", behavior,
                                      "\"; relserve supports Isolated (DeBERTa's split_by_punct)"));
    }
    out->split_on_punctuation = true;
    return absl::OkStatus();
  }
  if (type == "BertPreTokenizer") {
    out->bert_pre_tokenizer = true;
    return absl::OkStatus();
  }
  if (type == "ByteLevel") {
    bool use_regex = true;
    RETURN_IF_ERROR(reader.Bool("use_regex", &use_regex));
    if (!use_regex) {
      return where.Error("has use_regex false; relserve splits with GPT-2's pattern");
    }
    RETURN_IF_ERROR(reader.Bool("add_prefix_space", &out->add_prefix_space));
    out->byte_level = true;
    return absl::OkStatus();
  }
  return Unsupported(where, type,
                     "Sequence, Metaspace, WhitespaceSplit, Punctuation, BertPreTokenizer, "
                     "ByteLevel");
}

// A [token, id] pair of BertProcessing and RobertaProcessing.
absl::StatusOr<TokenizerJsonTemplateItem> ParseTokenIdPair(const json& node, const char* key,
                                                           int32_t type_id, const Where& where) {
  ASSIGN_OR_RETURN(const json* pair, Required(node, key, where));
  if (!pair->is_array() || pair->size() != 2 || !(*pair)[0].is_string() ||
      !(*pair)[1].is_number_integer()) {
    return where.Child(key).Error(
        absl::StrCat("must be [token, id], got ", JsonValueForMessage(*pair)));
  }
  const int64_t id = (*pair)[1].get<int64_t>();
  if (id < 0 || id >= kMaxId) {
    return where.Child(key).Error(absl::StrCat("has id ", id, " outside [0, ", kMaxId, ")"));
  }
  TokenizerJsonTemplateItem item;
  item.name = (*pair)[0].get<std::string>();
  item.ids = {static_cast<int32_t>(id)};
  item.type_id = type_id;
  return item;
}

absl::StatusOr<std::vector<TokenizerJsonTemplateItem>> ParseTemplateSide(
    const json& list, const json& special_tokens, const Where& where) {
  if (!list.is_array()) return where.Error("must be a list");
  std::vector<TokenizerJsonTemplateItem> items;
  for (size_t i = 0; i < list.size(); ++i) {
    const Where at = where.Index(i);
    const json& entry = list[i];
    TokenizerJsonTemplateItem item;
    const json* body = nullptr;
    if (entry.is_object() && entry.contains("Sequence")) {
      body = &entry["Sequence"];
    } else if (entry.is_object() && entry.contains("SpecialToken")) {
      body = &entry["SpecialToken"];
    } else {
      return at.Error(absl::StrCat("must be {\"Sequence\": ...} or {\"SpecialToken\": ...}, got ",
                                   JsonValueForMessage(entry)));
    }
    const JsonFieldReader reader(*body, at.Name());
    std::string id;
    RETURN_IF_ERROR(reader.String("id", &id));
    RETURN_IF_ERROR(reader.Int("type_id", &item.type_id, 0, 255));
    if (entry.contains("Sequence")) {
      if (id != "A" && id != "B") return at.Error(absl::StrCat("names sequence \"", id, "\""));
      item.sequence = id == "A" ? 0 : 1;
    } else {
      auto special = special_tokens.find(id);
      if (!special_tokens.is_object() || special == special_tokens.end()) {
        return at.Error(absl::StrCat("names \"", id, "\", which special_tokens lacks"));
      }
      const Where def = where.Child("special_tokens").Child(id);
      auto ids = special->find("ids");
      if (ids == special->end() || !ids->is_array() || ids->empty()) {
        return def.Error("has no \"ids\" list");
      }
      for (const json& value : *ids) {
        if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
            value.get<int64_t>() >= kMaxId) {
          return def.Error(absl::StrCat("has an id outside [0, ", kMaxId,
                                        "]: ", JsonValueForMessage(value)));
        }
        item.ids.push_back(static_cast<int32_t>(value.get<int64_t>()));
      }
      item.name = id;
    }
    items.push_back(std::move(item));
  }
  return items;
}

// One post-processor; *found is set when it places special tokens.
absl::Status ParsePostProcessor(const json& node, const Where& where,
                                std::optional<TokenizerJson::Template>* out) {
  if (node.is_null()) return absl::OkStatus();
  ASSIGN_OR_RETURN(const std::string type, TypeOf(node, where));
  if (type == "Sequence") {
    ASSIGN_OR_RETURN(const json* list, Required(node, "processors", where));
    if (!list->is_array()) return where.Child("processors").Error("must be a list");
    for (size_t i = 0; i < list->size(); ++i) {
      RETURN_IF_ERROR(ParsePostProcessor((*list)[i], where.Child("processors").Index(i), out));
    }
    return absl::OkStatus();
  }
  if (type == "ByteLevel") return absl::OkStatus();  // trims offsets only
  if (out->has_value()) {
    return where.Error("is a second post-processor that adds special tokens");
  }
  TokenizerJson::Template t;
  if (type == "TemplateProcessing") {
    ASSIGN_OR_RETURN(const json* single, Required(node, "single", where));
    ASSIGN_OR_RETURN(const json* pair, Required(node, "pair", where));
    const json empty = json::object();
    auto special = node.find("special_tokens");
    const json& specials = special == node.end() || special->is_null() ? empty : *special;
    ASSIGN_OR_RETURN(t.single, ParseTemplateSide(*single, specials, where.Child("single")));
    ASSIGN_OR_RETURN(t.pair, ParseTemplateSide(*pair, specials, where.Child("pair")));
  } else if (type == "BertProcessing" || type == "RobertaProcessing") {
    ASSIGN_OR_RETURN(TokenizerJsonTemplateItem cls, ParseTokenIdPair(node, "cls", 0, where));
    ASSIGN_OR_RETURN(TokenizerJsonTemplateItem sep, ParseTokenIdPair(node, "sep", 0, where));
    TokenizerJsonTemplateItem a{0, "", {}, 0};
    TokenizerJsonTemplateItem b{1, "", {}, 1};
    TokenizerJsonTemplateItem sep_b = sep;
    sep_b.type_id = 1;
    t.single = {cls, a, sep};
    if (type == "BertProcessing") {
      t.pair = {cls, a, sep, b, sep_b};
    } else {
      t.pair = {cls, a, sep, sep_b, b, sep_b};
    }
  } else {
    return Unsupported(where, type,
                       "TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, "
                       "Sequence");
  }
  *out = std::move(t);
  return absl::OkStatus();
}

absl::Status ParseAddedTokens(const json& root, const std::string& source, TokenizerJson* out) {
  auto it = root.find("added_tokens");
  if (it == root.end() || it->is_null()) return absl::OkStatus();
  const Where where{source, "added_tokens"};
  if (!it->is_array()) return where.Error("must be a list");
  for (size_t i = 0; i < it->size(); ++i) {
    const json& entry = (*it)[i];
    const Where at = where.Index(i);
    if (!entry.is_object()) return at.Error("must be an object");
    const JsonFieldReader reader(entry, at.Name());
    int64_t id = -1;
    if (!reader.Has("id")) return at.Error("has no \"id\"");
    RETURN_IF_ERROR(reader.Int64("id", &id, 0, kMaxId - 1));
    AddedTokenEntry token;
    if (!reader.Has("content")) return at.Error("has no \"content\"");
    RETURN_IF_ERROR(reader.String("content", &token.content));
    RETURN_IF_ERROR(reader.Bool("lstrip", &token.flags.lstrip));
    RETURN_IF_ERROR(reader.Bool("rstrip", &token.flags.rstrip));
    RETURN_IF_ERROR(reader.Bool("single_word", &token.flags.single_word));
    RETURN_IF_ERROR(reader.Bool("special", &token.flags.special));
    bool normalized = !token.flags.special;  // the `tokenizers` default
    RETURN_IF_ERROR(reader.Bool("normalized", &normalized));
    token.flags.normalized = normalized;
    out->added_tokens.emplace_back(static_cast<int32_t>(id), std::move(token));
  }
  return absl::OkStatus();
}

// The model's type; files of early `tokenizers` releases leave it out, and their fields tell.
absl::StatusOr<std::string> ModelType(const json& model, const Where& where) {
  if (!model.is_object()) {
    return where.Error(absl::StrCat("must be an object, got ", JsonValueForMessage(model)));
  }
  auto it = model.find("type");
  if (it != model.end() && it->is_string()) return it->get<std::string>();
  if (model.contains("merges")) return std::string("BPE");
  auto vocab = model.find("vocab");
  if (vocab != model.end() && vocab->is_array()) return std::string("Unigram");
  if (model.contains("continuing_subword_prefix")) return std::string("WordPiece");
  return where.Error("has no \"type\" and its fields name no model relserve reads");
}

absl::Status ParseVocabMap(const json& model, const Where& where, TokenizerJson* out) {
  ASSIGN_OR_RETURN(const json* vocab, Required(model, "vocab", where));
  if (!vocab->is_object()) return where.Child("vocab").Error("must be an object of token: id");
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() >= kMaxId) {
      return where.Child("vocab").Error(absl::StrCat("gives \"", token, "\" the id ",
                                                     JsonValueForMessage(id), ", not one in [0, ",
                                                     kMaxId, ")"));
    }
    out->vocab.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  return absl::OkStatus();
}

absl::Status ParseUnigram(const json& model, const Where& where, TokenizerJson* out) {
  out->model_type = TokenizerJson::ModelType::kUnigram;
  ASSIGN_OR_RETURN(const json* vocab, Required(model, "vocab", where));
  if (!vocab->is_array()) return where.Child("vocab").Error("must be a list of [piece, score]");
  for (size_t i = 0; i < vocab->size(); ++i) {
    const json& entry = (*vocab)[i];
    if (!entry.is_array() || entry.size() != 2 || !entry[0].is_string() || !entry[1].is_number()) {
      return where.Child("vocab").Index(i).Error(
          absl::StrCat("must be [piece, score], got ", JsonValueForMessage(entry)));
    }
    out->unigram_vocab.emplace_back(entry[0].get<std::string>(), entry[1].get<double>());
  }
  const JsonFieldReader reader(model, where.Name());
  if (!reader.Has("unk_id")) {
    return where.Error("has no unk_id; relserve needs the Unigram model's unknown piece");
  }
  RETURN_IF_ERROR(reader.Int("unk_id", &out->unk_id, 0,
                             static_cast<int64_t>(out->unigram_vocab.size()) - 1));
  return reader.Bool("byte_fallback", &out->byte_fallback);
}

absl::Status ParseWordPiece(const json& model, const Where& where, TokenizerJson* out) {
  out->model_type = TokenizerJson::ModelType::kWordPiece;
  const JsonFieldReader reader(model, where.Name());
  std::string prefix = "##";
  RETURN_IF_ERROR(reader.String("continuing_subword_prefix", &prefix));
  if (prefix != "##") {
    return where.Error(absl::StrCat("has continuing_subword_prefix \"", prefix,
                                    "\"; relserve's WordPiece uses \"##\""));
  }
  if (!reader.Has("unk_token")) return where.Error("has no unk_token");
  RETURN_IF_ERROR(reader.String("unk_token", &out->unk_token));
  RETURN_IF_ERROR(reader.Int("max_input_chars_per_word", &out->max_input_chars_per_word, 1,
                             std::numeric_limits<int>::max()));
  return ParseVocabMap(model, where, out);
}

absl::Status ParseBpe(const json& model, const Where& where, TokenizerJson* out) {
  out->model_type = TokenizerJson::ModelType::kBpe;
  const JsonFieldReader reader(model, where.Name());
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string value;
    RETURN_IF_ERROR(reader.String(key, &value));
    if (!value.empty()) {
      return where.Error(absl::StrCat("has ", key, " \"", value,
                                      "\"; relserve reads byte-level BPE, which has none"));
    }
  }
  double dropout = 0.0;
  RETURN_IF_ERROR(reader.Double("dropout", &dropout, 0.0, 1.0));
  bool byte_fallback = false;
  bool ignore_merges = false;
  RETURN_IF_ERROR(reader.Bool("byte_fallback", &byte_fallback));
  RETURN_IF_ERROR(reader.Bool("ignore_merges", &ignore_merges));
  if (dropout != 0.0 || byte_fallback || ignore_merges) {
    return where.Error("uses dropout, byte_fallback or ignore_merges, which RobertaTokenizer "
                       "does not have");
  }
  RETURN_IF_ERROR(reader.String("unk_token", &out->unk_token));
  RETURN_IF_ERROR(ParseVocabMap(model, where, out));
  ASSIGN_OR_RETURN(const json* merges, Required(model, "merges", where));
  if (!merges->is_array()) return where.Child("merges").Error("must be a list");
  for (size_t i = 0; i < merges->size(); ++i) {
    const json& merge = (*merges)[i];
    // "a b" (tokenizers before 0.20) or ["a", "b"].
    if (merge.is_string()) {
      const std::string text = merge.get<std::string>();
      const size_t space = text.find(' ');
      if (space != std::string::npos && text.find(' ', space + 1) == std::string::npos) {
        out->merges.emplace_back(text.substr(0, space), text.substr(space + 1));
        continue;
      }
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      out->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
      continue;
    }
    return where.Child("merges").Index(i).Error(
        absl::StrCat("must be \"a b\" or [\"a\", \"b\"], got ", JsonValueForMessage(merge)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TokenizerJson> ParseTokenizerJson(const json& root, const std::string& source) {
  if (!root.is_object()) return absl::InvalidArgumentError(absl::StrCat(source, ": not a JSON object"));
  TokenizerJson out;
  const Where model_where{source, "model"};
  auto model = root.find("model");
  if (model == root.end() || model->is_null()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": has no \"model\""));
  }
  ASSIGN_OR_RETURN(const std::string type, ModelType(*model, model_where));
  if (type == "Unigram") {
    RETURN_IF_ERROR(ParseUnigram(*model, model_where, &out));
  } else if (type == "WordPiece") {
    RETURN_IF_ERROR(ParseWordPiece(*model, model_where, &out));
  } else if (type == "BPE") {
    RETURN_IF_ERROR(ParseBpe(*model, model_where, &out));
  } else {
    return Unsupported(model_where, type, "Unigram, WordPiece, BPE");
  }
  const json null;
  auto part = [&](const char* key) -> const json& {
    auto it = root.find(key);
    return it == root.end() ? null : *it;
  };
  RETURN_IF_ERROR(ParseNormalizer(part("normalizer"), Where{source, "normalizer"}, &out));
  RETURN_IF_ERROR(ParsePreTokenizer(part("pre_tokenizer"), Where{source, "pre_tokenizer"}, &out));
  RETURN_IF_ERROR(
      ParsePostProcessor(part("post_processor"), Where{source, "post_processor"}, &out.post_processor));
  RETURN_IF_ERROR(ParseAddedTokens(root, source, &out));
  return out;
}

absl::StatusOr<TokenizerJson> ReadTokenizerJson(const std::string& path) {
  if (!FileExists(path)) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
  ASSIGN_OR_RETURN(const json root, ReadJsonFile(path));
  return ParseTokenizerJson(root, path);
}

}  // namespace relserve
