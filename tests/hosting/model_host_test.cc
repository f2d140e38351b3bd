// The model host (server/hosting/): what it builds from a model spec and its options.
#include "server/hosting/model_host.h"

#include <future>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/batching/length_buckets.h"
#include "server/metrics/server_metrics.h"
#include "server/model/kernels/amx_gemm.h"

namespace relserve {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A tiny DeBERTa-v3 (tests/data/reference/README.md), max length 512, no tokenizer.
const std::string kModel = std::string(RELSERVE_TEST_DATA_DIR) + "/reference/deberta_v3_like";

HostOptions QuietOptions() {
  HostOptions options;
  options.cpus = 2;
  options.warmup = false;
  options.log = false;
  return options;
}

TEST(HostBatcherConfigTest, ReflectsTheOptions) {
  HostOptions options;
  options.policy.max_batch_tokens = 999;
  options.policy.max_batch_size = 7;
  options.policy.max_queue_delay = absl::Microseconds(123);
  options.policy.length_bucketing = false;
  options.max_queue_sequences = 55;
  bool stopped = false;
  options.stop_requested = [&stopped] { return stopped; };
  BatcherConfig config = HostBatcherConfig(options, "m", 300, 3);
  EXPECT_EQ(config.policy.max_batch_tokens, 999);
  EXPECT_EQ(config.policy.max_batch_size, 7);
  EXPECT_EQ(config.policy.max_queue_delay, absl::Microseconds(123));
  EXPECT_FALSE(config.policy.length_bucketing);
  EXPECT_EQ(config.num_workers, 3);
  EXPECT_EQ(config.max_queue_sequences, 55u);
  EXPECT_EQ(config.model_name, "m");
  EXPECT_TRUE(config.warm_up_workers);
  ASSERT_TRUE(config.stop);
  EXPECT_FALSE(config.stop());
  stopped = true;
  EXPECT_TRUE(config.stop());
  EXPECT_FALSE(config.on_worker_start);
  // No bounds given: the one default, ending at the model's max length.
  EXPECT_EQ(config.policy.bucket_bounds, DefaultLengthBuckets(300));
  EXPECT_EQ(config.policy.bucket_bounds.back(), 300);
  // Bounds given are kept as they are.
  options.policy.bucket_bounds = {16, 64};
  EXPECT_THAT(HostBatcherConfig(options, "m", 300, 1).policy.bucket_bounds, ElementsAre(16, 64));
  // Workers warm up on their own threads only with both switches on.
  options.warmup_workers = false;
  EXPECT_FALSE(HostBatcherConfig(options, "m", 300, 1).warm_up_workers);
  options.warmup_workers = true;
  options.warmup = false;
  EXPECT_FALSE(HostBatcherConfig(options, "m", 300, 1).warm_up_workers);
}

TEST(ModelHostTest, BuildsOneCopyPerDevice) {
  HostOptions options = QuietOptions();
  options.devices = {"cpu", "cpu"};
  ServerMetrics metrics;
  auto host = ModelHost::Create(options, &metrics);
  ASSERT_TRUE(host.ok()) << host.status();
  // Two copies share the two CPUs: one single-threaded worker each.
  EXPECT_EQ((*host)->workers().workers, 1);
  EXPECT_EQ((*host)->workers().threads, 1);
  ASSERT_TRUE((*host)->Add({"m", kModel}).ok());
  const std::vector<const InferenceBackend*> copies = (*host)->backends("m");
  ASSERT_EQ(copies.size(), 2u);
  EXPECT_NE(copies[0], copies[1]);
  EXPECT_EQ(copies[0]->info().max_length, copies[1]->info().max_length);
  auto served = (*host)->registry().Find("m");
  ASSERT_TRUE(served.ok()) << served.status();
  EXPECT_EQ((*served)->backend, copies[0]);
  EXPECT_NE((*served)->batcher, nullptr);
  EXPECT_EQ((*served)->tokenizer, nullptr);  // this directory has no tokenizer
  EXPECT_EQ((*served)->devices, "cpu,cpu");
  EXPECT_EQ((*served)->model_id, kModel);
  EXPECT_EQ((*served)->max_length, copies[0]->info().max_length);
  EXPECT_THAT(metrics.Render(), HasSubstr("device=\"cpu,cpu\""));
  EXPECT_TRUE((*host)->backends("other").empty());
}

// bfloat16 on relserve's AMX GEMM takes float32's workers (single-thread workers side by side);
// through oneDNN's linear, one worker over the CPUs (worker_count.h).
TEST(ModelHostTest, BFloat16WorkersFollowWhatRunsItsProjections) {
  HostOptions options = QuietOptions();
  options.engine.dtype = DType::kBFloat16;
  auto own = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(own.ok()) << own.status();
  if (PackedBFloat16Weights::Supported()) {
    EXPECT_EQ((*own)->workers().workers, 2);
    EXPECT_EQ((*own)->workers().threads, 1);
    ASSERT_TRUE((*own)->Add({"m", kModel}).ok());
    EXPECT_EQ((*own)->backends("m")[0]->info().projections,
              std::string("relserve-") + BFloat16KernelName(PackedBFloat16Weights::Best()));
  } else {
    EXPECT_EQ((*own)->workers().workers, 1);
  }
  options.engine.kernels.packed_bfloat16_gemm = false;
  auto onednn = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(onednn.ok()) << onednn.status();
  EXPECT_EQ((*onednn)->workers().workers, 1);
  EXPECT_EQ((*onednn)->workers().threads, 2);
  options.workers_per_device = 2;
  EXPECT_EQ(ModelHost::Create(options, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

// int8 likewise: side by side where its projections run in relserve's int8 GEMM (AMX tiles,
// AVX-512 VNNI or AVX2), one worker over both CPUs through oneDNN's.
TEST(ModelHostTest, Int8WorkersFollowWhatRunsItsProjections) {
  HostOptions options = QuietOptions();
  options.engine.dtype = DType::kInt8;
  auto own = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(own.ok()) << own.status();
  if (PackedInt8Weights::Supported() || PackedInt8Weights::VnniSupported() || PackedInt8Weights::Avx2Supported()) {
    EXPECT_EQ((*own)->workers().workers, 2);
    EXPECT_EQ((*own)->workers().threads, 1);
    ASSERT_TRUE((*own)->Add({"m", kModel}).ok());
    EXPECT_EQ((*own)->backends("m")[0]->info().projections, PackedInt8Weights::Supported()       ? "relserve-amx-int8"
                                                            : PackedInt8Weights::VnniSupported() ? "relserve-vnni-int8"
                                                                                                 : "relserve-avx2-int8");
  } else {
    EXPECT_EQ((*own)->workers().workers, 1);
  }
  options.engine.kernels.packed_int8_gemm = false;
  auto onednn = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(onednn.ok()) << onednn.status();
  EXPECT_EQ((*onednn)->workers().workers, 1);
  EXPECT_EQ((*onednn)->workers().threads, 2);
  ASSERT_TRUE((*onednn)->Add({"m", kModel}).ok());
  EXPECT_EQ((*onednn)->backends("m")[0]->info().projections, "onednn-int8");
}

// The batcher the host starts runs the model: a sequence submitted comes back with its embedding.
TEST(ModelHostTest, ItsBatcherRunsTheModel) {
  HostOptions options = QuietOptions();
  options.warmup = true;  // and warm-up runs over the length buckets first
  auto host = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(host.ok()) << host.status();
  ASSERT_TRUE((*host)->Add({"m", kModel}).ok());
  auto served = (*host)->registry().Find("m");
  ASSERT_TRUE(served.ok());
  std::promise<absl::StatusOr<SequenceOutput>> answer;
  std::vector<SequenceTask> tasks(1);
  tasks[0].input.input_ids = {1, 5, 6, 7, 2};
  tasks[0].outputs = kOutputPooled;
  tasks[0].done = [&answer](absl::StatusOr<SequenceOutput> out, const TaskTiming&) { answer.set_value(std::move(out)); };
  ASSERT_TRUE((*served)->batcher->Submit(std::move(tasks)).ok());
  absl::StatusOr<SequenceOutput> out = answer.get_future().get();
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(static_cast<int>(out->pooled.size()), (*served)->backend->info().hidden_size);
}

TEST(ModelHostTest, AModelAlreadyLoadedIsServedAsIs) {
  auto loaded = LoadModel(kModel, EngineOptions());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Engine* engine = loaded->engine.get();
  auto host = ModelHost::Create(QuietOptions(), nullptr);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE((*host)->Add("model", std::move(*loaded), "").ok());
  auto served = (*host)->registry().Find("model");
  ASSERT_TRUE(served.ok());
  EXPECT_EQ((*served)->backend, engine);
  EXPECT_EQ((*served)->devices, "cpu");
  EXPECT_THAT((*host)->backends("model"), ElementsAre(engine));
}

TEST(ModelHostTest, ASimulatedDeviceIsHostedWithoutADirectory) {
  auto host = ModelHost::Create(QuietOptions(), nullptr);
  ASSERT_TRUE(host.ok());
  ASSERT_TRUE((*host)->Add({"sim", "simulated:h100-deberta-v3-base"}).ok());
  auto served = (*host)->registry().Find("sim");
  ASSERT_TRUE(served.ok());
  EXPECT_EQ((*served)->devices, "simulated");
  EXPECT_EQ((*served)->tokenizer, nullptr);
  EXPECT_THAT((*served)->model_id, HasSubstr("h100-deberta-v3-base"));
  EXPECT_EQ((*host)->backends("sim").size(), 1u);
}

TEST(ModelHostTest, ErrorsNameTheModel) {
  auto host = ModelHost::Create(QuietOptions(), nullptr);
  ASSERT_TRUE(host.ok());
  const absl::Status missing = (*host)->Add({"x", "/no/such/model/dir"});
  EXPECT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.message()), StartsWith("model x: "));
  const absl::Status bad_profile = (*host)->Add({"s", "simulated:no-such-gpu"});
  EXPECT_EQ(bad_profile.code(), absl::StatusCode::kNotFound);  // no such profile
  EXPECT_THAT(std::string(bad_profile.message()), StartsWith("model s: "));
  EXPECT_TRUE((*host)->registry().All().empty());
}

TEST(ModelHostTest, AStopRequestCancelsLoading) {
  HostOptions options = QuietOptions();
  options.stop_requested = [] { return true; };
  auto host = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(host.ok());
  EXPECT_EQ((*host)->Add({"m", kModel}).code(), absl::StatusCode::kCancelled);
  EXPECT_TRUE((*host)->registry().All().empty());
}

// A Hub model's fetch reads the environment the host is handed (main()'s), never the process's
// own: the cache and the offline switch below come from the handed map alone.
TEST(ModelHostTest, AHubModelReadsTheEnvironmentItIsHanded) {
  const std::string handed_cache = ::testing::TempDir() + "/model_host_handed_cache";
  const std::map<std::string, std::string> offline = {{"HF_HUB_OFFLINE", "1"}, {"HF_HUB_CACHE", handed_cache}};
  HostOptions options = QuietOptions();
  options.environment = MapEnvironmentReader(offline);
  auto host = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(host.ok());
  const absl::Status missing = (*host)->Add({"h", "org/not-cached"});
  EXPECT_EQ(missing.code(), absl::StatusCode::kNotFound) << missing;
  EXPECT_THAT(std::string(missing.message()),
              AllOf(StartsWith("model h: "), HasSubstr("not in the cache " + handed_cache)));

  const std::map<std::string, std::string> unreadable = {{"HF_HUB_OFFLINE", "maybe"}};
  options.environment = MapEnvironmentReader(unreadable);
  auto strict = ModelHost::Create(options, nullptr);
  ASSERT_TRUE(strict.ok());
  const absl::Status bad = (*strict)->Add({"h", "org/not-cached"});
  EXPECT_EQ(bad.code(), absl::StatusCode::kInvalidArgument) << bad;
  EXPECT_THAT(std::string(bad.message()), HasSubstr("HF_HUB_OFFLINE"));
  // A local directory never reads it.
  EXPECT_TRUE((*strict)->Add({"m", kModel}).ok());
}

// A bad device list is refused before anything loads.
TEST(ModelHostTest, RefusesNoDevice) {
  HostOptions options = QuietOptions();
  options.devices.clear();
  EXPECT_EQ(ModelHost::Create(options, nullptr).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace relserve
