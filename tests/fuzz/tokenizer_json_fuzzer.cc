// Fuzzes tokenizer.json: the input is the file, loaded as every tokenizer family's tokenizer
// (ParseTokenizerJson, ApplyTokenizerJson, the SentencePiece model built from a Unigram file,
// the WordPiece and BPE vocabularies, the template). A bad file must come back as an error
// status, never as an exception or a crash, and a tokenizer that loads must encode text into
// ids it knows, with the template's special tokens around the text.

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "server/tokenizer/tokenizer.h"
#include "server/util/file_util.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_temp_dir.h"

namespace relserve {
namespace {

constexpr TokenizerFamily kFamilies[] = {
    TokenizerFamily::kDeberta, TokenizerFamily::kT5,    TokenizerFamily::kXlnet,
    TokenizerFamily::kBert,    TokenizerFamily::kMpnet, TokenizerFamily::kRoberta,
    TokenizerFamily::kXlmRoberta,
};

const std::string& FuzzDir() {
  static const std::string* dir = new std::string(fuzz::MakeTempDir("relserve_tokenizer_json_fuzz"));
  return *dir;
}

void CheckEncoding(const Tokenizer& tokenizer, const absl::StatusOr<Encoding>& enc, bool pair) {
  if (!enc.ok()) {
    FUZZ_CHECK(enc.status().code() == absl::StatusCode::kInvalidArgument, "%s",
               enc.status().ToString().c_str());
    return;
  }
  const size_t n = enc->input_ids.size();
  FUZZ_CHECK(enc->token_type_ids.size() == n && enc->attention_mask.size() == n &&
                 enc->offsets.size() == n && enc->sequence_ids.size() == n,
             "encoding fields of different lengths");
  size_t specials = 0;
  for (size_t i = 0; i < n; ++i) {
    FUZZ_CHECK(enc->input_ids[i] >= 0 && enc->input_ids[i] < tokenizer.vocab_size(),
               "id %d outside the vocabulary of %d", enc->input_ids[i], tokenizer.vocab_size());
    if (enc->sequence_ids[i] < 0) ++specials;
  }
  FUZZ_CHECK(specials == static_cast<size_t>(tokenizer.NumSpecialTokens(pair)),
             "%zu special tokens, the template has %d", specials, tokenizer.NumSpecialTokens(pair));
}

}  // namespace
}  // namespace relserve

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace relserve;
  const std::string path = JoinPath(FuzzDir(), "tokenizer.json");
  const absl::Status written =
      WriteStringToFile(path, std::string(reinterpret_cast<const char*>(data), size));
  FUZZ_CHECK(written.ok(), "setup: %s", written.ToString().c_str());
  for (const TokenizerFamily family : kFamilies) {
    auto tokenizer = Tokenizer::Load(FuzzDir(), family, 64);
    if (!tokenizer.ok()) {
      const absl::StatusCode code = tokenizer.status().code();
      FUZZ_CHECK(code == absl::StatusCode::kInvalidArgument || code == absl::StatusCode::kNotFound,
                 "%s", tokenizer.status().ToString().c_str());
      continue;
    }
    const Tokenizer& t = **tokenizer;
    CheckEncoding(t, t.Encode("Hello [CLS] world, 1,5 <s> caf\xC3\xA9 \xE4\xB8\xAD"), false);
    CheckEncoding(t, t.EncodePair("a question?", "an answer."), true);
  }
  return 0;
}
