#ifndef RELSERVE_SERVER_HTTP_API_JSON_FIELDS_H_
#define RELSERVE_SERVER_HTTP_API_JSON_FIELDS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"
#include "server/serving/serving_types.h"

namespace relserve {

// Reading request bodies: every failure is a status whose message names the field and what
// was expected, never an exception. A field that is absent or null takes its default (as
// the originals' optional fields do).

// Arrays and objects in a request body nest no deeper than this: a real request nests 3 or 4
// levels (inputs as arrays of arrays of token ids), and a value nested 100,000 deep would
// overflow the stack of whatever copies, compares or prints it.
inline constexpr int kMaxRequestJsonDepth = 64;

// The body as a JSON object. Not JSON (bad syntax, invalid UTF-8, a number too large for a
// double) or nested deeper than kMaxRequestJsonDepth: INVALID_ARGUMENT with HTTP 400 and the
// parser's position, or the limit; JSON that is not an object: 422.
absl::StatusOr<nlohmann::json> ParseJsonObject(const std::string& body);

// "<field> is empty" (400, FieldErrorKind::kEmpty).
absl::Status EmptyField(const std::string& field);
// "<field> must be <expected>, not <type of got>" (422, FieldErrorKind::kInvalid).
absl::Status WrongTypeError(const std::string& field, const char* expected, const nlohmann::json& got);

// Every failure below carries its field (server/util/field_error.h).
absl::Status ReadBool(const nlohmann::json& object, const char* field, bool* out);
absl::Status ReadString(const nlohmann::json& object, const char* field, std::string* out);
// An integer in [min, max].
absl::Status ReadInt(const nlohmann::json& object, const char* field, int64_t min, int64_t max, int* out);
// Whether a field is absent or null (takes its default).
bool FieldAbsent(const nlohmann::json& object, const char* field);
// A required field that must be present and not null.
absl::StatusOr<const nlohmann::json*> Required(const nlohmann::json& object, const char* field);
// A required string that must not be empty: "<field> must be a string, not <type>" (422), or
// "<field> is empty" (400).
absl::Status ReadRequiredNonEmptyString(const nlohmann::json& object, const char* field, std::string* out);

// "a string", "an array", ...: for messages.
std::string JsonTypeName(const nlohmann::json& value);

// Token ids: an array of integers in [0, 2^31). `field` names it in errors.
absl::StatusOr<std::vector<int32_t>> ReadTokenIds(const nlohmann::json& value, const std::string& field);

// The inputs of an embedding request, as OpenAI's `input` and TEI's `inputs` take them: a
// string, an array of token ids (one input), or an array whose items are strings or arrays of
// token ids. An empty array or string is refused (400).
absl::StatusOr<std::vector<Input>> ReadEmbedInputs(const nlohmann::json& value, const std::string& field);

// TEI's `truncate` (absent or null: unset, so the server's --auto-truncate decides) and
// `truncation_direction`: "Right" (the default) or "Left", as TEI spells them, or in lower case.
absl::Status ReadTruncation(const nlohmann::json& object, Truncation* out);

// relserve's long-input fields of an embedding request: `whole_input` (true or false; absent
// or null: the server's --whole-input) and `window_overlap` (an integer >= 0; absent: the
// server's --window-overlap).
absl::Status ReadWholeInput(const nlohmann::json& object, EmbedRequest* out);

// relserve's chunked-rerank fields of every rerank route: `chunk_documents` (true or false;
// absent or null: the server's --rerank-chunking), `max_chunks_per_doc` (Cohere v1's name, an
// integer >= 1; given, it turns chunking on) and `chunk_overlap` (an integer >= 0).
absl::Status ReadRerankChunking(const nlohmann::json& object, RerankRequest* out);
// A rerank hit's `windows` (how many windows its document was scored in), added to `hit` when
// the request was chunked.
void AddRerankWindows(const RerankResult& result, const RerankHit& hit, nlohmann::json* out);

// Serialises a response; strings that are not UTF-8 (a tokenizer piece cut inside a
// character) have the bad bytes replaced by U+FFFD instead of failing.
std::string DumpJson(const nlohmann::json& value);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_JSON_FIELDS_H_
