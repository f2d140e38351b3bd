#include "server/http_transport/request_body.h"

#include <gtest/gtest.h>

#include <string>

namespace relserve {
namespace {

HttpRequestHead Head(std::vector<std::pair<std::string, std::string>> headers, int minor = 1) {
  HttpRequestHead h;
  h.method = "POST";
  h.target = h.path = "/embed";
  h.minor_version = minor;
  h.headers = std::move(headers);
  return h;
}

TEST(BodyFramingTest, ContentLengthValuesAndLimits) {
  BodyFraming f = DecideBodyFraming(Head({{"Content-Length", "12"}}), 100);
  EXPECT_EQ(f.kind, BodyFraming::Kind::kLength);
  EXPECT_EQ(f.length, 12u);
  EXPECT_EQ(DecideBodyFraming(Head({{"content-length", "12, 12"}, {"Content-Length", "012"}}), 100).kind,
            BodyFraming::Kind::kLength);
  // No framing: a GET has no body; a POST must say how long its body is (411).
  HttpRequestHead get = Head({});
  get.method = "GET";
  EXPECT_EQ(DecideBodyFraming(get, 100).kind, BodyFraming::Kind::kNone);
  for (const char* method : {"POST", "PUT", "PATCH"}) {
    HttpRequestHead unframed = Head({});
    unframed.method = method;
    const BodyFraming no_length = DecideBodyFraming(unframed, 100);
    EXPECT_EQ(no_length.kind, BodyFraming::Kind::kError) << method;
    EXPECT_EQ(no_length.status, 411) << method;
  }
  EXPECT_EQ(DecideBodyFraming(Head({{"Content-Length", "100"}}), 100).kind, BodyFraming::Kind::kLength);

  for (const char* bad : {"-1", "", "1e3", "+5", "0x10", " 5 5", "5;"}) {
    f = DecideBodyFraming(Head({{"Content-Length", bad}}), 100);
    EXPECT_EQ(f.kind, BodyFraming::Kind::kError) << bad;
    EXPECT_EQ(f.status, 400) << bad;
    EXPECT_NE(f.error.find("Content-Length"), std::string::npos) << f.error;
  }
  f = DecideBodyFraming(Head({{"Content-Length", "5"}, {"Content-Length", "6"}}), 100);
  EXPECT_EQ(f.status, 400);
  EXPECT_NE(f.error.find("differ"), std::string::npos) << f.error;

  f = DecideBodyFraming(Head({{"Content-Length", "101"}}), 100);
  EXPECT_EQ(f.status, 413);
  EXPECT_NE(f.error.find("101 bytes"), std::string::npos) << f.error;
  EXPECT_NE(f.error.find("limit of 100 bytes"), std::string::npos) << f.error;
  // 2^64 and longer digit strings saturate; they are over any limit, not wrapped to small numbers.
  for (const char* huge : {"18446744073709551616", "18446744073709551615", "99999999999999999999999999"}) {
    f = DecideBodyFraming(Head({{"Content-Length", huge}}), 100);
    EXPECT_EQ(f.status, 413) << huge;
  }
}

TEST(BodyFramingTest, TransferEncodings) {
  EXPECT_EQ(DecideBodyFraming(Head({{"Transfer-Encoding", "chunked"}}), 100).kind, BodyFraming::Kind::kChunked);
  EXPECT_EQ(DecideBodyFraming(Head({{"transfer-encoding", " Chunked "}}), 100).kind, BodyFraming::Kind::kChunked);

  BodyFraming f = DecideBodyFraming(Head({{"Transfer-Encoding", "gzip, chunked"}}), 100);
  EXPECT_EQ(f.status, 501);
  EXPECT_NE(f.error.find("\"gzip\""), std::string::npos) << f.error;
  f = DecideBodyFraming(Head({{"Transfer-Encoding", "gzip"}, {"Transfer-Encoding", "chunked"}}), 100);
  EXPECT_EQ(f.status, 501);
  EXPECT_EQ(DecideBodyFraming(Head({{"Transfer-Encoding", "chunked, gzip"}}), 100).status, 400);
  EXPECT_EQ(DecideBodyFraming(Head({{"Transfer-Encoding", "chunked, chunked"}}), 100).status, 400);
  EXPECT_EQ(DecideBodyFraming(Head({{"Transfer-Encoding", ""}}), 100).status, 400);
  EXPECT_EQ(DecideBodyFraming(Head({{"Transfer-Encoding", "chunked"}}, /*minor=*/0), 100).status, 400);
  f = DecideBodyFraming(Head({{"Transfer-Encoding", "chunked"}, {"Content-Length", "5"}}), 100);
  EXPECT_EQ(f.status, 400);
  EXPECT_NE(f.error.find("both"), std::string::npos) << f.error;
}

// Feeds `wire` to a decoder in pieces of `step` bytes.
ChunkedBodyDecoder::Outcome Decode(const std::string& wire, size_t step, size_t limit, std::string* body,
                                   size_t* total_used, ChunkedBodyDecoder* decoder = nullptr) {
  ChunkedBodyDecoder local(limit);
  ChunkedBodyDecoder& d = decoder != nullptr ? *decoder : local;
  *total_used = 0;
  ChunkedBodyDecoder::Outcome o = ChunkedBodyDecoder::Outcome::kIncomplete;
  for (size_t pos = 0; pos < wire.size(); pos += step) {
    size_t used = 0;
    const std::string_view piece = std::string_view(wire).substr(pos, step);
    o = d.Feed(piece, &used, body);
    *total_used += used;
    if (o != ChunkedBodyDecoder::Outcome::kIncomplete) return o;
    EXPECT_EQ(used, piece.size());
  }
  return o;
}

TEST(ChunkedBodyDecoderTest, DecodesInAnyPieces) {
  const std::string wire = "5;name=value\r\nhello\r\n1A\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: 1\r\n\r\nNEXT";
  for (size_t step : {1u, 2u, 3u, 7u, 1000u}) {
    std::string body;
    size_t used = 0;
    EXPECT_EQ(Decode(wire, step, 1000, &body, &used), ChunkedBodyDecoder::Outcome::kComplete) << step;
    EXPECT_EQ(body, "helloabcdefghijklmnopqrstuvwxyz") << step;
    EXPECT_EQ(wire.substr(used), "NEXT") << step;  // the next (pipelined) request is not eaten
  }
  std::string body;
  size_t used = 0;
  EXPECT_EQ(Decode("0\r\n\r\n", 1, 10, &body, &used), ChunkedBodyDecoder::Outcome::kComplete);
  EXPECT_EQ(body, "");
  EXPECT_EQ(Decode("3\r\nab", 100, 10, &body, &used), ChunkedBodyDecoder::Outcome::kIncomplete);
}

TEST(ChunkedBodyDecoderTest, RefusesOverTheLimitBeforeTheData) {
  std::string body;
  size_t used = 0;
  ChunkedBodyDecoder d(10);
  // The second chunk's size alone takes the body over the limit: refused at its size line.
  EXPECT_EQ(Decode("8\r\n12345678\r\n3\r\n", 1, 10, &body, &used, &d), ChunkedBodyDecoder::Outcome::kError);
  EXPECT_EQ(d.status(), 413);
  EXPECT_NE(d.error().find("limit of 10 bytes"), std::string::npos) << d.error();
  EXPECT_EQ(body, "12345678");
  // A size of 2^64 and more does not wrap around.
  ChunkedBodyDecoder huge(1 << 20);
  body.clear();
  EXPECT_EQ(Decode("10000000000000000\r\n", 5, 1 << 20, &body, &used, &huge), ChunkedBodyDecoder::Outcome::kError);
  EXPECT_EQ(huge.status(), 413);
  ChunkedBodyDecoder wrap(1 << 20);
  EXPECT_EQ(Decode("FFFFFFFFFFFFFFFF\r\n", 5, 1 << 20, &body, &used, &wrap), ChunkedBodyDecoder::Outcome::kError);
  EXPECT_EQ(wrap.status(), 413);
}

TEST(ChunkedBodyDecoderTest, MalformedFramingIs400) {
  struct Case {
    const char* wire;
    const char* says;
  };
  for (const Case& c : {Case{"x\r\n", "hex size"}, Case{"5 x\r\nhello\r\n", "after the size"},
                        Case{"5\nhello\r\n0\r\n\r\n", "bare LF"}, Case{"5\r\nhelloX\r\n", "CRLF"},
                        Case{"5\r\nhello\rX", "CRLF"}, Case{"5\r\x01\n", "CR not followed"},
                        Case{"0\r\nnot a field\r\n\r\n", "trailer"}, Case{"5;\x01\r\n", "control"}}) {
    ChunkedBodyDecoder d(1000);
    std::string body;
    size_t used = 0;
    EXPECT_EQ(Decode(c.wire, 1, 1000, &body, &used, &d), ChunkedBodyDecoder::Outcome::kError) << c.wire;
    EXPECT_EQ(d.status(), 400) << c.wire;
    EXPECT_NE(d.error().find(c.says), std::string::npos) << c.wire << ": " << d.error();
    // Once failed, it stays failed.
    size_t more = 7;
    EXPECT_EQ(d.Feed("0\r\n\r\n", &more, &body), ChunkedBodyDecoder::Outcome::kError);
    EXPECT_EQ(more, 0u);
  }
  // Framing lines and trailers are bounded.
  ChunkedBodyDecoder line(1000, /*max_line_bytes=*/16);
  std::string body;
  size_t used = 0;
  EXPECT_EQ(Decode("5;" + std::string(100, 'a') + "\r\n", 1, 1000, &body, &used, &line),
            ChunkedBodyDecoder::Outcome::kError);
  EXPECT_NE(line.error().find("longer than 16"), std::string::npos) << line.error();
  ChunkedBodyDecoder trailer(1000, 4096, /*max_trailer_bytes=*/32);
  std::string trailers = "0\r\n";
  for (int i = 0; i < 10; ++i) trailers += "X-A: 1\r\n";
  EXPECT_EQ(Decode(trailers + "\r\n", 1, 1000, &body, &used, &trailer), ChunkedBodyDecoder::Outcome::kError);
  EXPECT_NE(trailer.error().find("trailer"), std::string::npos) << trailer.error();
}

}  // namespace
}  // namespace relserve
