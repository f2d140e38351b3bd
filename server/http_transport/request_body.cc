#include "server/http_transport/request_body.h"

#include <algorithm>
#include <cctype>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace relserve {
namespace {

constexpr uint64_t kMaxUint64 = ~uint64_t{0};

BodyFraming FramingError(int status, std::string error) {
  BodyFraming f;
  f.kind = BodyFraming::Kind::kError;
  f.status = status;
  f.error = std::move(error);
  return f;
}

// A value for a message: at most 40 bytes, quoted.
std::string Quote(absl::string_view value) {
  std::string out = "\"";
  for (const char c : value.substr(0, 40)) {
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  if (value.size() > 40) out += "...";
  return out + "\"";
}

bool IsDigits(absl::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The value of a decimal digit string, saturated at kMaxUint64.
uint64_t DecimalValue(absl::string_view digits) {
  uint64_t v = 0;
  for (const char c : digits) {
    const uint64_t d = static_cast<uint64_t>(c - '0');
    if (v > (kMaxUint64 - d) / 10) return kMaxUint64;
    v = v * 10 + d;
  }
  return v;
}

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

}  // namespace

BodyFraming DecideBodyFraming(const HttpRequestHead& head, size_t max_body_bytes) {
  std::vector<std::string> codings;
  std::vector<absl::string_view> lengths;
  bool has_te = false, has_length = false;
  for (const auto& [name, value] : head.headers) {
    if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
      has_te = true;
      for (absl::string_view coding : absl::StrSplit(value, ',')) {
        coding = absl::StripAsciiWhitespace(coding);
        if (!coding.empty()) codings.push_back(absl::AsciiStrToLower(coding));
      }
    } else if (absl::EqualsIgnoreCase(name, "content-length")) {
      has_length = true;
      for (absl::string_view v : absl::StrSplit(value, ',')) lengths.push_back(absl::StripAsciiWhitespace(v));
    }
  }
  if (has_te && has_length) {
    return FramingError(400, "the request has both Transfer-Encoding and Content-Length");
  }
  if (has_te) {
    if (head.minor_version == 0) return FramingError(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (codings.empty()) return FramingError(400, "Transfer-Encoding is empty");
    // Codings are applied in order, chunked last; params after ';' are not allowed on chunked.
    if (codings.back() != "chunked") {
      return FramingError(400, absl::StrCat("Transfer-Encoding ", Quote(codings.back()),
                                            " does not end with chunked, so the body's length is unknown"));
    }
    for (size_t i = 0; i + 1 < codings.size(); ++i) {
      if (codings[i] == "chunked") return FramingError(400, "Transfer-Encoding lists chunked more than once");
      return FramingError(501, absl::StrCat("the transfer coding ", Quote(codings[i]),
                                            " is not supported (only chunked is)"));
    }
    BodyFraming f;
    f.kind = BodyFraming::Kind::kChunked;
    return f;
  }
  if (has_length) {
    for (absl::string_view v : lengths) {
      if (!IsDigits(v)) return FramingError(400, absl::StrCat("Content-Length ", Quote(v), " is not a number of bytes"));
      if (DecimalValue(v) != DecimalValue(lengths.front())) {
        return FramingError(400, "the request has Content-Length values that differ");
      }
    }
    const uint64_t length = DecimalValue(lengths.front());
    if (length > max_body_bytes) {
      return FramingError(413, absl::StrCat("the request body of ",
                                            length == kMaxUint64 ? std::string("more than 2^64 - 1")
                                                                 : std::to_string(length),
                                            " bytes is larger than the limit of ", max_body_bytes, " bytes"));
    }
    BodyFraming f;
    f.kind = BodyFraming::Kind::kLength;
    f.length = length;
    return f;
  }
  // A request that carries content must say how long it is (RFC 9112 6.3: without a length a
  // request's body is empty, so a POST would silently lose what its client meant to send).
  if (head.method == "POST" || head.method == "PUT" || head.method == "PATCH") {
    return FramingError(411, absl::StrCat("a ", head.method,
                                          " request needs a Content-Length (or Transfer-Encoding: chunked)"));
  }
  return BodyFraming{};
}

ChunkedBodyDecoder::Outcome ChunkedBodyDecoder::Fail(int status, std::string error) {
  state_ = State::kFailed;
  status_ = status;
  error_ = std::move(error);
  return Outcome::kError;
}

ChunkedBodyDecoder::Outcome ChunkedBodyDecoder::OnSizeLine() {
  // chunk-size [ BWS ";" chunk-ext ] with chunk-size = 1*HEXDIG.
  size_t i = 0;
  uint64_t size = 0;
  bool overflow = false;
  while (i < line_.size() && HexDigit(line_[i]) >= 0) {
    if (size > (kMaxUint64 >> 4)) overflow = true;
    size = (size << 4) | static_cast<uint64_t>(HexDigit(line_[i]));
    ++i;
  }
  if (i == 0) return Fail(400, absl::StrCat("the chunk size line ", Quote(line_), " does not start with a hex size"));
  size_t j = i;
  while (j < line_.size() && (line_[j] == ' ' || line_[j] == '\t')) ++j;
  if (j < line_.size() && line_[j] != ';') {
    return Fail(400, absl::StrCat("the chunk size line ", Quote(line_), " has bytes after the size"));
  }
  for (size_t k = j; k < line_.size(); ++k) {
    const unsigned char c = static_cast<unsigned char>(line_[k]);
    if ((c < 0x20 && c != '\t') || c == 0x7f) return Fail(400, "a chunk extension holds a control character");
  }
  if (overflow || size > max_body_bytes_ - decoded_) {
    return Fail(413, absl::StrCat("the chunked request body is larger than the limit of ", max_body_bytes_,
                                  " bytes"));
  }
  line_.clear();
  if (size == 0) {
    state_ = State::kTrailer;
  } else {
    chunk_left_ = size;
    state_ = State::kData;
  }
  return Outcome::kIncomplete;
}

ChunkedBodyDecoder::Outcome ChunkedBodyDecoder::Feed(std::string_view in, size_t* used, std::string* body) {
  size_t pos = 0;
  *used = 0;
  if (state_ == State::kDone) return Outcome::kComplete;
  if (state_ == State::kFailed) return Outcome::kError;
  while (pos < in.size()) {
    switch (state_) {
      case State::kData: {
        const size_t n = static_cast<size_t>(std::min<uint64_t>(chunk_left_, in.size() - pos));
        body->append(in.data() + pos, n);
        pos += n;
        chunk_left_ -= n;
        decoded_ += n;
        if (chunk_left_ == 0) state_ = State::kDataEnd;
        break;
      }
      case State::kDataEnd: {
        line_.push_back(in[pos++]);
        if (line_.size() == 1 && line_[0] != '\r') {
          *used = pos;
          return Fail(400, "a chunk's data is not followed by CRLF (its size is wrong)");
        }
        if (line_.size() == 2) {
          if (line_[1] != '\n') {
            *used = pos;
            return Fail(400, "a chunk's data is not followed by CRLF (its size is wrong)");
          }
          line_.clear();
          state_ = State::kSizeLine;
        }
        break;
      }
      case State::kSizeLine:
      case State::kTrailer: {
        const char c = in[pos++];
        if (state_ == State::kTrailer && ++trailer_bytes_ > max_trailer_bytes_) {
          *used = pos;
          return Fail(400, absl::StrCat("the chunked body's trailer is longer than ", max_trailer_bytes_, " bytes"));
        }
        if (c != '\n') {
          if (!line_.empty() && line_.back() == '\r') {
            *used = pos;
            return Fail(400, "a CR not followed by LF in the chunked framing");
          }
          line_.push_back(c);
          if (line_.size() > max_line_bytes_) {
            *used = pos;
            return Fail(400, absl::StrCat("a chunk framing line is longer than ", max_line_bytes_, " bytes"));
          }
          break;
        }
        if (line_.empty() || line_.back() != '\r') {
          *used = pos;
          return Fail(400, "a line of the chunked framing ends with a bare LF, not CRLF");
        }
        line_.pop_back();
        if (state_ == State::kSizeLine) {
          const Outcome o = OnSizeLine();
          if (o == Outcome::kError) {
            *used = pos;
            return o;
          }
        } else if (line_.empty()) {
          state_ = State::kDone;
          *used = pos;
          return Outcome::kComplete;
        } else {
          if (line_.find(':') == std::string::npos) {
            *used = pos;
            return Fail(400, "a trailer line of the chunked body is not a header field");
          }
          line_.clear();
        }
        break;
      }
      case State::kDone:
      case State::kFailed:
        break;  // not reached: returned above
    }
  }
  *used = pos;
  return Outcome::kIncomplete;
}

}  // namespace relserve
