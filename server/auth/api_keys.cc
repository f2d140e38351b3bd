#include "server/auth/api_keys.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <filesystem>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/util/file_util.h"

namespace relserve {
namespace {

constexpr uintmax_t kMaxKeyFileBytes = 1 << 20;
constexpr char kExpected[] = "expected the header \"authorization: Bearer <key>\"";

std::array<uint8_t, 32> Sha256(std::string_view data) {
  std::array<uint8_t, 32> digest{};
  unsigned int size = 0;
  // EVP_Digest fails only when the library cannot allocate; a zero digest then matches no key
  // that was hashed successfully.
  EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr);
  return digest;
}

// Where in `key` a byte that is not visible ASCII sits; npos when none.
size_t FirstInvisibleByte(std::string_view key) {
  for (size_t i = 0; i < key.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(key[i]);
    if (c < 0x21 || c > 0x7e) return i;
  }
  return std::string_view::npos;
}

// absl's string_view is its own type in Debian's Abseil.
std::string_view StripBlanks(std::string_view s) {
  const absl::string_view stripped = absl::StripAsciiWhitespace(absl::string_view(s.data(), s.size()));
  return std::string_view(stripped.data(), stripped.size());
}

}  // namespace

bool ConstantTimeEquals(std::string_view a, std::string_view b) {
  const auto da = Sha256(a), db = Sha256(b);
  return CRYPTO_memcmp(da.data(), db.data(), da.size()) == 0;
}

absl::StatusOr<std::unique_ptr<ApiKeys>> ApiKeys::Create(const std::vector<std::string>& keys,
                                                         const std::string& source) {
  if (keys.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no API key given"));
  std::vector<Digest> digests;
  for (size_t i = 0; i < keys.size(); ++i) {
    const std::string where = keys.size() == 1 ? source : absl::StrCat(source, " (key ", i + 1, ")");
    if (keys[i].empty()) return absl::InvalidArgumentError(absl::StrCat(where, ": the API key is empty"));
    if (const size_t at = FirstInvisibleByte(keys[i]); at != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          where, ": the API key holds a byte that is not visible ASCII (0x21-0x7e) at offset ", at,
          "; keys travel in HTTP headers and gRPC metadata"));
    }
    digests.push_back(Sha256(keys[i]));
  }
  return std::unique_ptr<ApiKeys>(new ApiKeys(std::move(digests)));
}

absl::StatusOr<std::unique_ptr<ApiKeys>> ApiKeys::FromFlags(const std::string& api_key,
                                                            const std::string& api_key_file) {
  if (!api_key.empty() && !api_key_file.empty()) {
    return absl::InvalidArgumentError("--api-key and --api-key-file exclude each other: give one");
  }
  if (!api_key.empty()) return Create({api_key}, "--api-key");
  if (api_key_file.empty()) return std::unique_ptr<ApiKeys>();
  auto keys = ReadApiKeyFile(api_key_file);
  if (!keys.ok()) return keys.status();
  return Create(*keys, absl::StrCat("--api-key-file ", api_key_file));
}

absl::Status ApiKeys::Check(std::optional<std::string_view> authorization) const {
  const std::string_view value = authorization.has_value() ? StripBlanks(*authorization) : std::string_view();
  if (value.empty()) return absl::UnauthenticatedError(absl::StrCat("missing API key (", kExpected, ")"));
  const size_t space = value.find_first_of(" \t");
  const std::string_view scheme = value.substr(0, space);
  if (!absl::EqualsIgnoreCase(absl::string_view(scheme.data(), scheme.size()), "Bearer")) {
    return absl::UnauthenticatedError(
        absl::StrCat("the authorization is not a Bearer token (", kExpected, ")"));
  }
  const std::string_view token = space == std::string_view::npos ? "" : StripBlanks(value.substr(space));
  if (token.empty()) return absl::UnauthenticatedError(absl::StrCat("missing API key (", kExpected, ")"));
  // Every key is compared, with no early exit: the time does not say which key (if any) matched.
  const Digest presented = Sha256(token);
  int matches = 0;
  for (const Digest& d : digests_) matches |= CRYPTO_memcmp(presented.data(), d.data(), d.size()) == 0;
  if (matches == 0) return absl::UnauthenticatedError("invalid API key");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ParseApiKeyFile(std::string_view contents, const std::string& path) {
  std::vector<std::string> keys;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(contents.data(), contents.size()), '\n')) {
    ++line_number;
    const std::string_view key = StripBlanks(std::string_view(line.data(), line.size()));
    if (key.empty()) continue;
    if (const size_t at = FirstInvisibleByte(key); at != std::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--api-key-file ", path, ": line ", line_number, ": the API key holds a byte that is not visible ASCII "
          "(0x21-0x7e) at offset ", at, "; keys travel in HTTP headers and gRPC metadata"));
    }
    keys.emplace_back(key);
  }
  if (keys.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--api-key-file ", path, ": the file holds no API key (one key per line)"));
  }
  return keys;
}

absl::StatusOr<std::vector<std::string>> ReadApiKeyFile(const std::string& path) {
  // A regular file (a Kubernetes Secret's file is a link to one) of a sensible size: a device
  // such as /dev/zero would never end.
  std::error_code error;
  const auto status = std::filesystem::status(path, error);
  if (!error && std::filesystem::exists(status) && !std::filesystem::is_regular_file(status)) {
    return absl::InvalidArgumentError(absl::StrCat("--api-key-file: ", path, ": not a regular file"));
  }
  if (const auto size = std::filesystem::file_size(path, error); !error && size > kMaxKeyFileBytes) {
    return absl::InvalidArgumentError(absl::StrCat("--api-key-file: ", path, ": ", size,
                                                   " bytes, more than the limit of ", kMaxKeyFileBytes));
  }
  auto contents = ReadFileToString(path);
  if (!contents.ok()) {
    return absl::Status(contents.status().code(), absl::StrCat("--api-key-file: ", contents.status().message()));
  }
  return ParseApiKeyFile(*contents, path);
}

}  // namespace relserve
