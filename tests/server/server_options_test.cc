// Each part's typed options from relserve's flags (server/main/server_options.h).
#include "server/main/server_options.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/length_buckets.h"
#include "server/main/server_config.h"

namespace relserve {
namespace {

using ::testing::ElementsAre;

ServerConfig Parse(const std::vector<std::string>& args) {
  absl::StatusOr<ServerConfig> config = ParseServerFlags(args);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ServerConfig();
}

// The server's real default: length buckets 8 apart to 64, then 16, 32, ..., ending at each
// model's max length (DefaultLengthBuckets), in bucketed batches.
TEST(ServerOptionsTest, TheDefaultBatchesByTheOneBucketDefault) {
  absl::StatusOr<HostOptions> options = HostOptionsFromFlags(Parse({"--model", "a=/x"}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->devices, ElementsAre("cpu"));
  EXPECT_TRUE(options->policy.length_bucketing);
  EXPECT_TRUE(options->policy.bucket_bounds.empty());
  const BatcherConfig batcher = HostBatcherConfig(*options, "a", 512, 4);
  EXPECT_EQ(batcher.policy.bucket_bounds, DefaultLengthBuckets(512));
  EXPECT_EQ(batcher.policy.max_batch_tokens, 16384);
  EXPECT_EQ(batcher.policy.max_batch_size, 64);
  EXPECT_EQ(batcher.policy.max_queue_delay, absl::Microseconds(2000));
  EXPECT_EQ(batcher.max_queue_sequences, 10000u);
  EXPECT_TRUE(batcher.warm_up_workers);
  EXPECT_TRUE(options->warmup);
  EXPECT_EQ(options->engine.batch_rounding, BatchRounding::kOnDevice);
  EXPECT_TRUE(options->engine.kernels.packed_float32_gemm);
  EXPECT_TRUE(options->engine.kernels.packed_bfloat16_gemm);
  EXPECT_TRUE(options->engine.kernels.packed_int8_gemm);
}

TEST(ServerOptionsTest, FlagsReachTheHostAndItsBatchers) {
  absl::StatusOr<HostOptions> options = HostOptionsFromFlags(
      Parse({"--model", "a=/x", "--device", "cpu,cpu", "--dtype", "float16", "--batching", "fifo",
             "--length-buckets", "16,64", "--max-batch-tokens", "4096", "--max-batch-size", "7",
             "--max-queue-delay-us", "55", "--max-queue-sequences", "9", "--workers-per-device", "3",
             "--threads-per-worker", "2", "--gpu-batch-sizes", "exact", "--max-input-length", "128",
             "--cuda-graph-tokens", "0", "--pooling", "cls", "--warmup-workers=false", "--offline",
             "--int8-attention", "float32", "--float32-gemm", "blas", "--bfloat16-gemm", "onednn",
             "--int8-gemm", "onednn", "--int8-weight-bits", "8"}));
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_THAT(options->devices, ElementsAre("cpu", "cpu"));
  EXPECT_EQ(options->engine.dtype, DType::kFloat16);
  EXPECT_EQ(options->engine.max_length, 128);
  EXPECT_EQ(options->engine.cuda_graph_tokens, 0);
  EXPECT_EQ(options->engine.pooling, "cls");
  EXPECT_EQ(options->engine.int8_attention, Int8Attention::kFloat32);
  EXPECT_EQ(options->engine.int8_weight_bits, Int8WeightBits::kEight);
  EXPECT_FALSE(options->engine.kernels.packed_float32_gemm);
  EXPECT_FALSE(options->engine.kernels.packed_bfloat16_gemm);
  EXPECT_FALSE(options->engine.kernels.packed_int8_gemm);
  EXPECT_EQ(options->engine.batch_rounding, BatchRounding::kExact);
  EXPECT_EQ(options->workers_per_device, 3);
  EXPECT_EQ(options->threads_per_worker, 2);
  EXPECT_TRUE(options->offline);
  const BatcherConfig batcher = HostBatcherConfig(*options, "a", 512, 3);
  EXPECT_FALSE(batcher.policy.length_bucketing);
  EXPECT_THAT(batcher.policy.bucket_bounds, ElementsAre(16, 64));
  EXPECT_EQ(batcher.policy.max_batch_tokens, 4096);
  EXPECT_EQ(batcher.policy.max_batch_size, 7);
  EXPECT_EQ(batcher.policy.max_queue_delay, absl::Microseconds(55));
  EXPECT_EQ(batcher.max_queue_sequences, 9u);
  EXPECT_FALSE(batcher.warm_up_workers);
  EXPECT_EQ(batcher.num_workers, 3);
}

TEST(ServerOptionsTest, TheSentencePieceModuleAndTheAllocatorReachTheEngines) {
  absl::StatusOr<HostOptions> defaults = HostOptionsFromFlags(Parse({"--model", "a=/x"}));
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->engine.sentencepiece.path, "");
  EXPECT_EQ(defaults->engine.allocator, AllocatorMode::kCache);
  absl::StatusOr<ServerConfig> config =
      ParseServerFlags({"--model", "a=/x", "--sentencepiece-module", "/lib/m.so"}, {{"RELSERVE_ALLOCATOR", "system"}});
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<HostOptions> options = HostOptionsFromFlags(*config);
  ASSERT_TRUE(options.ok()) << options.status();
  EXPECT_EQ(options->engine.sentencepiece.path, "/lib/m.so");
  EXPECT_EQ(options->engine.allocator, AllocatorMode::kSystem);
}

TEST(ServerOptionsTest, TransportsAndServingLimits) {
  const ServerConfig config =
      Parse({"--model", "a=/x", "--grpc-address", "127.0.0.1:0", "--max-message-bytes", "5000",
             "--max-response-bytes", "6000", "--max-connection-age-seconds", "7", "--shutdown-grace-seconds", "3",
             "--max-inputs-per-request", "11", "--whole-input", "--window-overlap", "4", "--http-threads", "5"});
  const GrpcServerOptions grpc = GrpcOptionsFromFlags(config);
  EXPECT_EQ(grpc.address, "127.0.0.1:0");
  EXPECT_EQ(grpc.max_receive_message_bytes, 5000);
  EXPECT_EQ(grpc.max_send_message_bytes, 6000);
  EXPECT_EQ(grpc.max_connection_age_seconds, 7);
  EXPECT_EQ(grpc.connection_age_grace_seconds, 3);  // calls on a closing connection get a drain's time
  const ServingLimits limits = ServingLimitsFromFlags(config);
  EXPECT_EQ(limits.max_inputs_per_request, 11);
  EXPECT_EQ(limits.max_response_bytes, 6000u);
  EXPECT_TRUE(limits.whole_input);
  EXPECT_EQ(limits.window_overlap, 4);
  absl::StatusOr<HttpServerConfig> http = HttpOptionsFromFlags(config);
  ASSERT_TRUE(http.ok()) << http.status();
  EXPECT_EQ(http->threads, 5);
  EXPECT_EQ(http->max_body_bytes, 5000u);
  EXPECT_EQ(HttpLimitsFromFlags(config).max_concurrent_requests, 5);
}

TEST(ServerOptionsTest, ABadDeviceListIsRefused) {
  ServerConfig config = Parse({"--model", "a=/x"});
  config.device = "cpu,";
  EXPECT_EQ(HostOptionsFromFlags(config).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
