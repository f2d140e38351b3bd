#ifndef RELSERVE_SERVER_AUTH_API_KEYS_H_
#define RELSERVE_SERVER_AUTH_API_KEYS_H_

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace relserve {

// The API keys a client must present (--api-key, --api-key-file), and the one check of a
// presented credential that gRPC, the HTTP API and the metrics endpoint share.
//
// Only SHA-256 digests of the keys are kept, and a presented key is compared with every one
// of them in constant time (ConstantTimeEquals): how long a check takes says nothing about
// how much of a key was right, nor about the keys' lengths. Nothing here logs or returns a key.
// Thread-safe once built (read-only).
class ApiKeys {
 public:
  // Each key must be non-empty visible ASCII (0x21-0x7e: what an HTTP header and gRPC metadata
  // both carry); INVALID_ARGUMENT otherwise, naming `source` ("--api-key", "--api-key-file
  // PATH: line 3") and never quoting the key. `keys` must not be empty.
  static absl::StatusOr<std::unique_ptr<ApiKeys>> Create(const std::vector<std::string>& keys,
                                                         const std::string& source);
  // From the flags: --api-key KEY or --api-key-file PATH (at most one of them non-empty).
  // nullptr when both are empty: no key is required.
  static absl::StatusOr<std::unique_ptr<ApiKeys>> FromFlags(const std::string& api_key,
                                                            const std::string& api_key_file);

  size_t size() const { return digests_.size(); }

  // OK when `authorization` (the value of an HTTP Authorization header or of gRPC's
  // "authorization" metadata; nullopt when the request has none) is "Bearer KEY" with one of
  // the keys (the scheme's case does not matter). Otherwise UNAUTHENTICATED with a message
  // that says whether the key was missing, not a Bearer token, or wrong.
  absl::Status Check(std::optional<std::string_view> authorization) const;

 private:
  using Digest = std::array<uint8_t, 32>;
  explicit ApiKeys(std::vector<Digest> digests) : digests_(std::move(digests)) {}
  std::vector<Digest> digests_;
};

// The keys of an --api-key-file's contents: one per line; blank lines and whitespace around a
// key are ignored. INVALID_ARGUMENT naming `path` and the line for a key that is not visible
// ASCII, and for a file without any key.
absl::StatusOr<std::vector<std::string>> ParseApiKeyFile(std::string_view contents, const std::string& path);
// Reads and parses the file; errors name --api-key-file and the path.
absl::StatusOr<std::vector<std::string>> ReadApiKeyFile(const std::string& path);

// Whether a and b are equal, in time that depends on their lengths only, not on their
// contents: both are hashed with SHA-256 and the digests compared with CRYPTO_memcmp, which
// looks at every byte. (A plain == stops at the first byte that differs, which tells an
// attacker timing the answers how many leading bytes of a guess were right.)
bool ConstantTimeEquals(std::string_view a, std::string_view b);

}  // namespace relserve

#endif  // RELSERVE_SERVER_AUTH_API_KEYS_H_
