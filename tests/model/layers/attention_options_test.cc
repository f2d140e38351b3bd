// --gpu-attention's value: the attention path and the SDPA backend (attention_options.h).
#include "server/model/layers/attention_options.h"

#include <string>

#include <ATen/Context.h>
#include <torch/version.h>

#include "gtest/gtest.h"
#include "server/model/layers/biased_attention.h"

namespace relserve {
namespace {

TEST(AttentionOptionsTest, ParsesPathAndBackend) {
  absl::StatusOr<AttentionOptions> bias = ParseAttentionOptions("bias");
  ASSERT_TRUE(bias.ok()) << bias.status();
  EXPECT_EQ(bias->path, DeviceAttention::kBias);
  EXPECT_EQ(bias->sdpa, SdpaBackend::kDefault);
  absl::StatusOr<AttentionOptions> tables = ParseAttentionOptions("tables:math");
  ASSERT_TRUE(tables.ok()) << tables.status();
  EXPECT_EQ(tables->path, DeviceAttention::kTables);
  EXPECT_EQ(tables->sdpa, SdpaBackend::kMath);
  const std::pair<const char*, SdpaBackend> backends[] = {{"bias:default", SdpaBackend::kDefault},
                                                          {"bias:auto", SdpaBackend::kAuto},
                                                          {"bias:cudnn", SdpaBackend::kCudnn},
                                                          {"bias:efficient", SdpaBackend::kEfficient},
                                                          {"bias:flash", SdpaBackend::kFlash}};
  for (const auto& [text, backend] : backends) {
    absl::StatusOr<AttentionOptions> parsed = ParseAttentionOptions(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(parsed->sdpa, backend) << text;
  }
}

TEST(AttentionOptionsTest, NamesReadBack) {
  for (const char* text : {"bias", "tables", "bias:auto", "bias:cudnn", "tables:efficient", "bias:flash", "bias:math"}) {
    absl::StatusOr<AttentionOptions> parsed = ParseAttentionOptions(text);
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_EQ(AttentionOptionsName(*parsed), text);
  }
  EXPECT_EQ(AttentionOptionsName(*ParseAttentionOptions("bias:default")), "bias");
}

TEST(AttentionOptionsTest, RefusesUnknownWordsNamingWhatIsAccepted) {
  absl::StatusOr<AttentionOptions> path = ParseAttentionOptions("Tables");
  ASSERT_FALSE(path.ok());
  EXPECT_EQ(path.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(path.status().message().find("\"Tables\""), std::string::npos) << path.status();
  EXPECT_NE(path.status().message().find("\"bias\" or \"tables\""), std::string::npos) << path.status();
  absl::StatusOr<AttentionOptions> backend = ParseAttentionOptions("bias:cudnn9");
  ASSERT_FALSE(backend.ok());
  EXPECT_EQ(backend.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(backend.status().message().find("\"cudnn9\""), std::string::npos) << backend.status();
  EXPECT_NE(backend.status().message().find("default, auto, cudnn, efficient, flash or math"), std::string::npos)
      << backend.status();
  EXPECT_FALSE(ParseAttentionOptions("bias:").ok());
}

// The default leaves cuDNN's attention out of LibTorch's choice and auto lets it in (LibTorch 2.4
// and later, which hold one switch per kernel); an older LibTorch takes both and refuses a
// named kernel, saying why.
TEST(AttentionOptionsTest, DefaultLeavesCudnnOutAndAutoLetsItIn) {
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 4)
  at::Context& context = at::globalContext();
  ASSERT_TRUE(UseSdpaBackend(SdpaBackend::kDefault).ok());
  EXPECT_FALSE(context.userEnabledCuDNNSDP());
  EXPECT_TRUE(context.userEnabledMemEfficientSDP());
  EXPECT_TRUE(context.userEnabledFlashSDP());
  EXPECT_TRUE(context.userEnabledMathSDP());
  ASSERT_TRUE(UseSdpaBackend(SdpaBackend::kAuto).ok());
  EXPECT_TRUE(context.userEnabledCuDNNSDP());
  EXPECT_TRUE(context.userEnabledMemEfficientSDP());
  ASSERT_TRUE(UseSdpaBackend(SdpaBackend::kEfficient).ok());
  EXPECT_FALSE(context.userEnabledCuDNNSDP());
  EXPECT_TRUE(context.userEnabledMemEfficientSDP());
  EXPECT_FALSE(context.userEnabledFlashSDP());
  EXPECT_FALSE(context.userEnabledMathSDP());
  ASSERT_TRUE(UseSdpaBackend(SdpaBackend::kDefault).ok());
#else
  EXPECT_TRUE(UseSdpaBackend(SdpaBackend::kDefault).ok());
  EXPECT_TRUE(UseSdpaBackend(SdpaBackend::kAuto).ok());
  const absl::Status cudnn = UseSdpaBackend(SdpaBackend::kCudnn);
  EXPECT_EQ(cudnn.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(cudnn.message().find("LibTorch 2.4 or later"), std::string::npos) << cudnn;
#endif
}

// --int8-attention's words, read back by Int8AttentionName; anything else is refused naming the three.
TEST(AttentionOptionsTest, Int8AttentionWords) {
  for (Int8Attention value : {Int8Attention::kAuto, Int8Attention::kFloat32, Int8Attention::kBfloat16}) {
    auto parsed = ParseInt8Attention(Int8AttentionName(value));
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_EQ(*parsed, value);
  }
  EXPECT_EQ(Int8AttentionName(Int8Attention::kBfloat16), "bfloat16");
  for (const char* bad : {"", "bf16", "float16", "Auto"}) {
    auto parsed = ParseInt8Attention(bad);
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(std::string(parsed.status().message()).find("auto, float32, bfloat16"), std::string::npos) << bad;
  }
}

}  // namespace
}  // namespace relserve
