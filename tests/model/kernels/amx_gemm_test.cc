// The bfloat16 GEMM, in AMX tiles and in AVX512-BF16 registers, against the same product in float64
// from the same bfloat16 values, rounded once to bfloat16: on shapes that exercise every row block (1-16 rows, 17-32,
// several blocks and tasks of rows), partial panels, strided inputs and outputs, with and
// without bias; and against LibTorch's own bfloat16 linear (oneDNN).
// The int8 GEMM in AMX tiles against the exact product of the values it quantizes to (each row's
// uint8 values and zero point, the weight's int8 values and scales), computed here from the
// documented rule, on the same kinds of shapes; each row's result independent of the others.
#include "server/model/kernels/amx_gemm.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <utility>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include "gtest/gtest.h"

namespace relserve {
namespace {

const uint16_t* Bits(const at::Tensor& t) { return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>()); }

// The exact product of the bfloat16 values, plus the bias, in float64.
at::Tensor Exact(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor out = at::matmul(a.to(at::kDouble), w.to(at::kDouble).t());
  return bias.defined() ? out + bias.to(at::kDouble) : out;
}

// Whether `got` (bfloat16) is the exact result rounded once to bfloat16 (half a unit in the last
// place: at most 2^-8 of its magnitude), give or take the float32 sum's own rounding (2^-20 of the sum of the
// products' magnitudes, for k up to a few thousand). A misplaced weight or row is off by O(1).
::testing::AssertionResult RoundedOnce(const at::Tensor& got, const at::Tensor& a, const at::Tensor& w,
                                       const at::Tensor& bias) {
  const at::Tensor exact = Exact(a, w, bias);
  at::Tensor scale = at::matmul(a.to(at::kDouble).abs(), w.to(at::kDouble).abs().t());
  if (bias.defined()) scale = scale + bias.to(at::kDouble).abs();
  const at::Tensor excess = (got.to(at::kDouble) - exact).abs() - (exact.abs() * std::ldexp(1.0, -8) + scale * std::ldexp(1.0, -20));
  const double worst = excess.max().item<double>();
  if (worst <= 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "off by " << worst << " beyond one rounding";
}

// a [m, k] bfloat16 may be a strided view; c is written into a wider buffer, so that ldc > n.
at::Tensor Gemm(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias, BFloat16Kernel kernel,
                int64_t extra_c_columns = 0) {
  auto packed = PackedBFloat16Weights::Pack(Bits(w), w.size(0), w.size(1), w.stride(0));
  at::Tensor c = at::full({a.size(0), w.size(0) + extra_c_columns}, 7.0f, at::kBFloat16);
  GemmBFloat16(Bits(a), a.size(0), a.size(0) > 1 ? a.stride(0) : a.size(1), *packed,
               bias.defined() ? Bits(bias) : nullptr, reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>()),
               c.stride(0), kernel);
  if (extra_c_columns > 0) {
    // Columns past n are never written.
    EXPECT_TRUE(at::all(c.narrow(1, w.size(0), extra_c_columns) == 7.0f).item<bool>());
  }
  return c.narrow(1, 0, w.size(0));
}

at::Tensor RandomBFloat16(std::initializer_list<int64_t> sizes) { return at::randn(sizes).to(at::kBFloat16); }

void PrintTo(BFloat16Kernel kernel, std::ostream* os) { *os << BFloat16KernelName(kernel); }

// Every bfloat16 kernel: AMX tiles and AVX512-BF16 registers, each where the CPU runs it.
class BFloat16KernelTest : public ::testing::TestWithParam<BFloat16Kernel> {
 protected:
  void SetUp() override {
    if (!PackedBFloat16Weights::Supports(kernel())) {
      GTEST_SKIP() << "this CPU does not run " << BFloat16KernelName(kernel()) << " (or it is not permitted)";
    }
  }
  BFloat16Kernel kernel() const { return GetParam(); }
  at::Tensor Run(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias, int64_t extra_c_columns = 0) {
    return Gemm(a, w, bias, kernel(), extra_c_columns);
  }
};

INSTANTIATE_TEST_SUITE_P(EveryKernel, BFloat16KernelTest,
                         ::testing::Values(BFloat16Kernel::kAmx, BFloat16Kernel::kAvx512),
                         [](const ::testing::TestParamInfo<BFloat16Kernel>& info) {
                           return info.param == BFloat16Kernel::kAmx ? std::string("Amx") : std::string("Avx512");
                         });

TEST_P(BFloat16KernelTest, MatchesTheExactProductOnEveryBlockAndPanelEdge) {
  c10::InferenceMode guard;
  at::manual_seed(3);
  // 12 and 13 rows: the AVX512-BF16 kernel's row blocks; 16, 32: the tiles'.
  for (int64_t m : {1, 2, 11, 12, 13, 15, 16, 17, 24, 25, 31, 32, 33, 48, 100, 255, 256, 257, 530}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 32}, {7, 64}, {16, 32}, {31, 96}, {32, 128}, {33, 256},
                        {50, 320}, {96, 768}}) {
      at::Tensor a = RandomBFloat16({m, k}), w = RandomBFloat16({n, k}), bias = RandomBFloat16({n});
      EXPECT_TRUE(RoundedOnce(Run(a, w, bias), a, w, bias)) << m << "x" << n << "x" << k;
      EXPECT_TRUE(RoundedOnce(Run(a, w, at::Tensor()), a, w, at::Tensor())) << m << "x" << n << "x" << k;
    }
  }
}

TEST_P(BFloat16KernelTest, StridedRowsAndWiderOutput) {
  c10::InferenceMode guard;
  at::manual_seed(4);
  at::Tensor wide = RandomBFloat16({37, 300});
  at::Tensor a = wide.narrow(1, 20, 256);        // rows 300 values apart
  at::Tensor w_wide = RandomBFloat16({70, 280});
  at::Tensor w = w_wide.narrow(1, 5, 256);       // weight rows 280 apart
  at::Tensor bias = RandomBFloat16({70});
  EXPECT_TRUE(RoundedOnce(Run(a, w, bias, /*extra_c_columns=*/9), a, w, bias));
}

TEST_P(BFloat16KernelTest, ZerosInAndInfinitiesCarry) {
  c10::InferenceMode guard;
  at::Tensor a = at::zeros({20, 64}, at::kBFloat16), w = RandomBFloat16({40, 64}), bias = RandomBFloat16({40});
  // Zero rows give exactly the bias.
  EXPECT_TRUE(at::equal(Run(a, w, bias), bias.expand({20, 40})));
  a[3][5] = std::numeric_limits<float>::infinity();
  w.fill_(1.0);
  const at::Tensor c = Run(a, w, at::Tensor());
  EXPECT_TRUE(at::all(at::isinf(c[3])).item<bool>());
  EXPECT_TRUE(at::all(c[2] == 0).item<bool>());
}

TEST_P(BFloat16KernelTest, CloseToLibTorchsBFloat16LinearAndTheSameOnOneOrTwoThreads) {
  c10::InferenceMode guard;
  at::manual_seed(5);
  at::Tensor a = RandomBFloat16({300, 768}), w = RandomBFloat16({3072, 768}), bias = RandomBFloat16({3072});
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = Run(a, w, bias);
  at::set_num_threads(2);
  const at::Tensor two = Run(a, w, bias);
  at::set_num_threads(threads);
  EXPECT_TRUE(at::equal(one, two));
  EXPECT_TRUE(RoundedOnce(one, a, w, bias));
  // LibTorch's rounds its own float32 sums once too: the two differ by about a unit at most.
  const at::Tensor libtorch = at::linear(a, w, bias);
  EXPECT_TRUE(RoundedOnce(libtorch, a, w, bias));
  const at::Tensor apart = (one.to(at::kDouble) - libtorch.to(at::kDouble)).abs();
  EXPECT_LE((apart - libtorch.to(at::kDouble).abs() * std::ldexp(1.0, -7)).max().item<double>(), 0.05);
}

// k that is not a multiple of the tiles' 32, odd k among them: the weight is padded with zeros, and
// no kernel reads past a row's end (the tiles copy the last columns out first; the AVX512-BF16
// kernel takes an odd k's last value alone): NaN past it stays out.
TEST_P(BFloat16KernelTest, DepthsThatAreNotAMultipleOf32) {
  c10::InferenceMode guard;
  at::manual_seed(7);
  for (int64_t m : {1, 12, 16, 20, 33, 300}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{5, 1}, {32, 17}, {40, 48}, {70, 100}, {64, 312}, {33, 771}}) {
      // Each row of a is followed by NaN, which a read past the row's end would carry into c.
      at::Tensor wide = at::full({m, k + 8}, std::numeric_limits<float>::quiet_NaN(), at::kBFloat16);
      at::Tensor a = wide.narrow(1, 0, k);
      a.copy_(RandomBFloat16({m, k}));
      at::Tensor w = RandomBFloat16({n, k}), bias = RandomBFloat16({n});
      const at::Tensor c = Run(a, w, bias);
      EXPECT_FALSE(at::any(at::isnan(c)).item<bool>()) << m << "x" << n << "x" << k;
      EXPECT_TRUE(RoundedOnce(c, a, w, bias)) << m << "x" << n << "x" << k;
      auto packed = PackedBFloat16Weights::Pack(Bits(w), n, k, k);
      EXPECT_EQ(packed->padded_k() % PackedBFloat16Weights::kDepthStep, 0);
      EXPECT_GE(packed->padded_k(), k);
    }
  }
}

// SerialGemmBFloat16 reads b either as [n, k] rows (a · bᵀ: attention's q · kᵀ and relative terms)
// or as [k, n] (a · b: the probabilities times v), packs it on the calling thread and runs the
// AVX512-BF16 kernel: the exact product rounded once, on row blocks, partial panels and odd depths,
// with NaN just past every row of a and b (a read past a row's end would carry it into c) and c's
// columns past n left as they were.
TEST(SerialBFloat16GemmTest, RoundedOnceInBothLayouts) {
  if (!PackedBFloat16Weights::Avx512Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  c10::InferenceMode guard;
  at::manual_seed(11);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 17, 64}, {12, 32, 64}, {13, 33, 63},
                         {128, 128, 64}, {127, 255, 64}, {40, 64, 127}, {200, 64, 128}, {7, 512, 32}, {3, 9, 2}}) {
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
    at::Tensor a_wide = at::full({m, k + 3}, nan, at::kBFloat16);
    at::Tensor a = a_wide.narrow(1, 0, k);
    a.copy_(RandomBFloat16({m, k}));
    at::Tensor rows_wide = at::full({n, k + 5}, nan, at::kBFloat16);  // b as [n, k]
    at::Tensor rows = rows_wide.narrow(1, 0, k);
    rows.copy_(RandomBFloat16({n, k}));
    at::Tensor cols_wide = at::full({k, n + 5}, nan, at::kBFloat16);  // b as [k, n]
    at::Tensor cols = cols_wide.narrow(1, 0, n);
    cols.copy_(RandomBFloat16({k, n}));
    at::Tensor c = at::full({m, n + 3}, 7.0f, at::kBFloat16);
    uint16_t* c_bits = reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>());
    SerialGemmBFloat16(Bits(a_wide), m, k + 3, Bits(rows_wide), n, k, /*b_row=*/k + 5, /*b_col=*/1, c_bits, n + 3);
    EXPECT_FALSE(at::any(at::isnan(c)).item<bool>()) << "a·bT";
    EXPECT_TRUE(RoundedOnce(c.narrow(1, 0, n), a, rows, at::Tensor())) << "a·bT";
    EXPECT_TRUE(at::all(c.narrow(1, n, 3) == 7.0f).item<bool>()) << "a·bT";
    SerialGemmBFloat16(Bits(a_wide), m, k + 3, Bits(cols_wide), n, k, /*b_row=*/1, /*b_col=*/n + 5, c_bits, n + 3);
    EXPECT_FALSE(at::any(at::isnan(c)).item<bool>()) << "a·b";
    EXPECT_TRUE(RoundedOnce(c.narrow(1, 0, n), a, cols.t(), at::Tensor())) << "a·b";
    EXPECT_TRUE(at::all(c.narrow(1, n, 3) == 7.0f).item<bool>()) << "a·b";
  }
  // No depth at all: zeros.
  at::Tensor a = RandomBFloat16({4, 1}), b = RandomBFloat16({3, 1});
  at::Tensor c = at::full({4, 3}, 7.0f, at::kBFloat16);
  SerialGemmBFloat16(Bits(a), 4, 1, Bits(b), 3, 0, 1, 1, reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>()), 3);
  EXPECT_TRUE(at::all(c == 0.0f).item<bool>());
}

// The thread's panels are kept between calls: a large product, then a small one, then the large
// one again give the same answers as alone (what a smaller call leaves in the panels is
// overwritten, padding included).
TEST(SerialBFloat16GemmTest, PanelsReusedAcrossShapes) {
  if (!PackedBFloat16Weights::Avx512Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  c10::InferenceMode guard;
  at::manual_seed(12);
  auto run = [](const at::Tensor& a, const at::Tensor& b) {
    at::Tensor c = at::empty({a.size(0), b.size(0)}, at::kBFloat16);
    SerialGemmBFloat16(Bits(a), a.size(0), a.size(1), Bits(b), b.size(0), b.size(1), b.size(1), 1,
                       reinterpret_cast<uint16_t*>(c.data_ptr<at::BFloat16>()), b.size(0));
    return c;
  };
  const at::Tensor big_a = RandomBFloat16({50, 96}), big_b = RandomBFloat16({70, 96});
  const at::Tensor small_a = RandomBFloat16({9, 33}), small_b = RandomBFloat16({5, 33});
  const at::Tensor big = run(big_a, big_b);
  const at::Tensor small = run(small_a, small_b);
  EXPECT_TRUE(RoundedOnce(small, small_a, small_b, at::Tensor()));
  EXPECT_TRUE(at::equal(run(big_a, big_b), big));
  EXPECT_TRUE(at::equal(run(small_a, small_b), small));
}

// With NeededColumns, SerialGemmBFloat16 gives each row's needed columns the same bits as without,
// and leaves alone every panel that no row of a 12-row block needs (a band moving right a column a
// row, as DeBERTa's relative terms read).
TEST(SerialBFloat16GemmTest, OnNeededColumnsOnly) {
  if (!PackedBFloat16Weights::Avx512Supported()) GTEST_SKIP() << "this CPU has no AVX512-BF16";
  c10::InferenceMode guard;
  at::manual_seed(13);
  constexpr int64_t kPanel = PackedBFloat16Weights::kPanelWidth, kTileRows = 12;
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{128, 255, 64}, {30, 100, 33}}) {
    SCOPED_TRACE(::testing::Message() << m << "x" << n << "x" << k);
    const at::Tensor a = RandomBFloat16({m, k}), b = RandomBFloat16({n, k});
    std::vector<int32_t> first(m), end(m);
    for (int64_t i = 0; i < m; ++i) {
      first[i] = static_cast<int32_t>(i);
      end[i] = static_cast<int32_t>(std::min<int64_t>(n, i + n - m + 1));
    }
    at::Tensor all = at::empty({m, n}, at::kBFloat16);
    SerialGemmBFloat16(Bits(a), m, k, Bits(b), n, k, k, 1, reinterpret_cast<uint16_t*>(all.data_ptr<at::BFloat16>()), n);
    at::Tensor some = at::full({m, n}, 7.0f, at::kBFloat16);
    SerialGemmBFloat16(Bits(a), m, k, Bits(b), n, k, k, 1, reinterpret_cast<uint16_t*>(some.data_ptr<at::BFloat16>()),
                       n, NeededColumns{first.data(), end.data()});
    int64_t skipped = 0;
    for (int64_t i = 0; i < m; ++i) {
      EXPECT_TRUE(at::equal(some[i].narrow(0, first[i], end[i] - first[i]), all[i].narrow(0, first[i], end[i] - first[i])))
          << "row " << i;
    }
    for (int64_t t = 0; t < m; t += kTileRows) {
      const int64_t rows = std::min(kTileRows, m - t);
      for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
        const int64_t c1 = std::min(n, c0 + kPanel);
        bool touched = false;
        for (int64_t i = t; i < t + rows; ++i) touched = touched || (first[i] < c1 && end[i] > c0);
        if (!touched) {
          EXPECT_TRUE(at::all(some.narrow(0, t, rows).narrow(1, c0, c1 - c0) == 7.0f).item<bool>())
              << "rows " << t << " columns " << c0;
          ++skipped;
        }
      }
    }
    EXPECT_GT(skipped, 0);
  }
}

// Where the CPU runs both kernels, they round the same float32 sums (up to their order) once: the
// two answers are at most a unit in the last place apart.
TEST(BFloat16KernelsTest, TheKernelsAgreeToAUnitInTheLastPlace) {
  if (!PackedBFloat16Weights::Supports(BFloat16Kernel::kAmx) ||
      !PackedBFloat16Weights::Supports(BFloat16Kernel::kAvx512)) {
    GTEST_SKIP() << "this CPU runs at most one bfloat16 kernel";
  }
  c10::InferenceMode guard;
  at::manual_seed(8);
  const at::Tensor a = RandomBFloat16({77, 768}), w = RandomBFloat16({200, 768}), bias = RandomBFloat16({200});
  const at::Tensor amx = Gemm(a, w, bias, BFloat16Kernel::kAmx).to(at::kDouble);
  const at::Tensor avx512 = Gemm(a, w, bias, BFloat16Kernel::kAvx512).to(at::kDouble);
  EXPECT_LE(((amx - avx512).abs() - amx.abs() * std::ldexp(1.0, -7)).max().item<double>(), 0.0);
}

// The kernel the CPU's projections take: AMX where it runs, else AVX512-BF16.
TEST(BFloat16KernelsTest, TheBestKernelIsOneTheCpuRuns) {
  EXPECT_EQ(PackedBFloat16Weights::Supported(), PackedBFloat16Weights::Supports(BFloat16Kernel::kAmx) ||
                                                    PackedBFloat16Weights::Supports(BFloat16Kernel::kAvx512));
  if (!PackedBFloat16Weights::Supported()) GTEST_SKIP() << "this CPU runs neither bfloat16 kernel";
  EXPECT_TRUE(PackedBFloat16Weights::Supports(PackedBFloat16Weights::Best()));
  if (PackedBFloat16Weights::Supports(BFloat16Kernel::kAmx)) {
    EXPECT_EQ(PackedBFloat16Weights::Best(), BFloat16Kernel::kAmx);
  }
}

// ---- int8

// What GemmInt8 documents, computed here in float64 from the values it quantizes to: each row of
// a quantized to uint8 (range [min(x, 0), max(x, 0)] over 255 steps, zero point rounded, values
// x * (1 / scale) rounded to nearest even, plus the zero point, clamped to [0, 255]), times the
// packed int8 weight (read back with Dequantized), rescaled, plus the bias. Also returns, per
// element, the magnitude the float32 arithmetic rounds against.
std::pair<at::Tensor, at::Tensor> ExactInt8(const at::Tensor& a, const PackedInt8Weights& w, const at::Tensor& bias) {
  const int64_t m = a.size(0), n = w.n(), k = w.k();
  at::Tensor out = at::zeros({m, n}, at::kDouble), magnitude = at::zeros({m, n}, at::kDouble);
  auto o = out.accessor<double, 2>();
  auto g = magnitude.accessor<double, 2>();
  const at::Tensor af = a.contiguous();
  std::vector<double> wq(static_cast<size_t>(n * k));
  for (int64_t f = 0; f < n; ++f) {
    for (int64_t j = 0; j < k; ++j) wq[f * k + j] = std::nearbyint(w.Dequantized(f, j) / w.scales()[f]);
  }
  for (int64_t i = 0; i < m; ++i) {
    const float* x = af.data_ptr<float>() + i * k;
    float lo = 0, hi = 0;
    for (int64_t j = 0; j < k; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
    float s = (hi - lo) / 255.0f;
    if (!(s > 0)) s = 1.0f;
    const float z = std::min(255.0f, std::max(0.0f, std::nearbyint(-lo / s)));
    const float inverse = 1.0f / s;
    for (int64_t f = 0; f < n; ++f) {
      double sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float q = std::min(255.0f, std::max(0.0f, std::nearbyint(x[j] * inverse) + z));
        sum += (static_cast<double>(q) - z) * wq[f * k + j];
      }
      const double b = bias.defined() ? bias[f].item<double>() : 0.0;
      o[i][f] = sum * s * w.scales()[f] + b;
      g[i][f] = std::abs(sum * s * w.scales()[f]) + std::abs(b);
    }
  }
  return {out, magnitude};
}

// Whether got (float32) is the exact result of ExactInt8 give or take float32's rounding of the
// int32 sum and the two scales (2^-20 of the magnitude); a misplaced weight, row or zero point is
// off by far more.
::testing::AssertionResult ExactAfterQuantizing(const at::Tensor& got, const at::Tensor& a, const PackedInt8Weights& w,
                                                const at::Tensor& bias) {
  auto [exact, magnitude] = ExactInt8(a, w, bias);
  const at::Tensor excess = (got.to(at::kDouble) - exact).abs() - (magnitude * std::ldexp(1.0, -20) + 1e-30);
  const double worst = excess.max().item<double>();
  if (worst <= 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "off by " << worst << " beyond float32's rounding";
}

// a [m, k] float32 may be a strided view; c is written into a wider buffer, so that ldc > n.
at::Tensor GemmInt8(const at::Tensor& a, const PackedInt8Weights& w, const at::Tensor& bias,
                    int64_t extra_c_columns = 0, Int8Kernel kernel = Int8Kernel::kAmx) {
  at::Tensor c = at::full({a.size(0), w.n() + extra_c_columns}, 7.0f);
  GemmInt8(a.data_ptr<float>(), a.size(0), a.size(0) > 1 ? a.stride(0) : a.size(1), w,
           bias.defined() ? bias.data_ptr<float>() : nullptr, c.data_ptr<float>(), c.stride(0), kernel);
  if (extra_c_columns > 0) {
    EXPECT_TRUE(at::all(c.narrow(1, w.n(), extra_c_columns) == 7.0f).item<bool>());  // never written
  }
  return c.narrow(1, 0, w.n());
}

std::shared_ptr<const PackedInt8Weights> QuantizeWeight(const at::Tensor& w,
                                                        int level = PackedInt8Weights::kEightBitLevel) {
  return PackedInt8Weights::Quantize(w.data_ptr<float>(), w.size(0), w.size(1), w.stride(0), level);
}

std::string KernelName(Int8Kernel kernel) {
  return kernel == Int8Kernel::kAmx ? "Amx" : kernel == Int8Kernel::kVnni ? "Vnni" : "Avx2";
}

// Every kernel: AMX tiles, AVX-512 VNNI registers and AVX2 registers, each on 8-bit and on 7-bit
// weights (the AVX2 kernel runs a kernel of its own for each).
struct KernelAndLevel {
  Int8Kernel kernel;
  int level;
};
void PrintTo(const KernelAndLevel& p, std::ostream* os) { *os << KernelName(p.kernel) << " at level " << p.level; }

class Int8GemmTest : public ::testing::TestWithParam<KernelAndLevel> {
 protected:
  void SetUp() override {
    if (!PackedInt8Weights::Supports(kernel())) GTEST_SKIP() << "this CPU does not run " << KernelName(kernel());
  }
  Int8Kernel kernel() const { return GetParam().kernel; }
  std::shared_ptr<const PackedInt8Weights> Quantize(const at::Tensor& w) { return QuantizeWeight(w, GetParam().level); }
};

INSTANTIATE_TEST_SUITE_P(
    EveryKernel, Int8GemmTest,
    ::testing::Values(KernelAndLevel{Int8Kernel::kAmx, 127}, KernelAndLevel{Int8Kernel::kVnni, 127},
                      KernelAndLevel{Int8Kernel::kAvx2, 127}, KernelAndLevel{Int8Kernel::kAmx, 63},
                      KernelAndLevel{Int8Kernel::kVnni, 63}, KernelAndLevel{Int8Kernel::kAvx2, 63}),
    [](const ::testing::TestParamInfo<KernelAndLevel>& info) {
      return KernelName(info.param.kernel) + (info.param.level == 127 ? "EightBit" : "SevenBit");
    });

TEST_P(Int8GemmTest, MatchesTheExactProductOfItsQuantizedValuesOnEveryEdge) {
  c10::InferenceMode guard;
  at::manual_seed(11);
  for (int64_t m : {1, 15, 16, 17, 32, 33, 100, 257, 300}) {
    for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 64}, {7, 1}, {31, 63}, {32, 65}, {33, 128}, {70, 200},
                        {96, 768}}) {
      // Rows of different ranges and signs: some all positive (zero point 0), some all negative.
      at::Tensor a = at::randn({m, k}) * (at::rand({m, 1}) * 4 + 0.01);
      if (m > 2) a[1] = a[1].abs(), a[2] = -a[2].abs();
      const at::Tensor w = at::randn({n, k}) * 0.1, bias = at::randn({n});
      auto packed = Quantize(w);
      EXPECT_TRUE(ExactAfterQuantizing(GemmInt8(a, *packed, bias, 0, kernel()), a, *packed, bias))
          << m << "x" << n << "x" << k;
      EXPECT_TRUE(ExactAfterQuantizing(GemmInt8(a, *packed, at::Tensor(), 0, kernel()), a, *packed, at::Tensor()))
          << m << "x" << n << "x" << k;
    }
  }
}

// The weight's int8 values: one symmetric scale per feature (max |w| / 127, or / 63 for 7-bit
// weights), each value within half a step of the float weight and within the level; an all-zero
// feature keeps scale 1.
TEST(Int8WeightsTest, WeightsAreQuantizedPerFeature) {
  for (int bits : {8, 7}) {
  SCOPED_TRACE(bits);
  c10::InferenceMode guard;
  at::manual_seed(12);
  at::Tensor w = at::randn({40, 100});
  w[3] = w[3] * 1e-3;
  w[5].zero_();
  const int max_level = bits == 8 ? PackedInt8Weights::kEightBitLevel : PackedInt8Weights::kSevenBitLevel;
  auto packed = QuantizeWeight(w, max_level);
  const float level = bits == 8 ? 127.0f : 63.0f;
  EXPECT_EQ(packed->max_level(), static_cast<int>(level));
  EXPECT_EQ(packed->padded_k(), 128);
  EXPECT_EQ(packed->panels(), 2);
  bool reached = false;
  for (int64_t f = 0; f < 40; ++f) {
    const float amax = w[f].abs().max().item<float>();
    const float scale = amax > 0 ? amax / level : 1.0f;
    EXPECT_FLOAT_EQ(packed->scales()[f], scale) << f;
    int32_t sum = 0;
    for (int64_t j = 0; j < 100; ++j) {
      const float v = packed->Dequantized(f, j);
      EXPECT_LE(std::abs(v - w[f][j].item<float>()), scale * 0.5f + 1e-9f) << f << "," << j;
      const int32_t value = static_cast<int32_t>(std::nearbyint(v / scale));
      EXPECT_LE(std::abs(value), static_cast<int32_t>(level)) << f << "," << j;
      reached = reached || std::abs(value) == static_cast<int32_t>(level);
      sum += value;
    }
    EXPECT_EQ(packed->sums()[f], sum) << f;
  }
  EXPECT_TRUE(reached);  // each feature's largest |w| takes the whole level
  for (int64_t f = 40; f < 64; ++f) EXPECT_EQ(packed->sums()[f], 0);
  }
}

// Halfway values round to even (nearbyint), every length of k (whole vectors of 16 and the masked
// rest), and a value past 127 scales rather than clips: with max |w| = 127 the scale is exactly 1.
TEST(Int8WeightsTest, TiesRoundToEvenAtEveryDepth) {
  const std::vector<float> cycle = {2.5f, 3.5f, -0.5f, -1.5f, 126.5f, 0.5f, -2.5f, 7.25f, -7.75f};
  for (int64_t k = 1; k <= 40; ++k) {
    SCOPED_TRACE(k);
    std::vector<float> w(static_cast<size_t>(2 * k));
    for (int64_t j = 0; j < k; ++j) {
      w[j] = j == 0 ? 127.0f : cycle[j % cycle.size()];  // feature 0: scale 1
      w[k + j] = 2.0f * w[j];                             // feature 1: scale 2, the same values
    }
    const auto packed = PackedInt8Weights::Quantize(w.data(), 2, k, k);
    EXPECT_EQ(packed->scales()[0], 1.0f);
    EXPECT_EQ(packed->scales()[1], 2.0f);
    for (int64_t f = 0; f < 2; ++f) {
      int32_t sum = 0;
      for (int64_t j = 0; j < k; ++j) {
        const float expected = std::nearbyint(w[j]);  // ties to even under the default rounding
        EXPECT_EQ(packed->Dequantized(f, j), expected * packed->scales()[f]) << f << "," << j;
        sum += static_cast<int32_t>(expected);
      }
      EXPECT_EQ(packed->sums()[f], sum) << f;
    }
  }
}

// Each row has its own scale: a row's result is the same, bit for bit, alone or among others of a
// very different range; zero rows give exactly the bias; strided rows with NaN past each row's
// end (which a read past it would carry in), on one thread or two.
TEST_P(Int8GemmTest, RowsAreIndependentAndNothingPastARowIsRead) {
  c10::InferenceMode guard;
  at::manual_seed(13);
  const int64_t m = 70, n = 90, k = 200;
  at::Tensor wide = at::full({m, k + 9}, std::numeric_limits<float>::quiet_NaN());
  at::Tensor a = wide.narrow(1, 0, k);
  a.copy_(at::randn({m, k}));
  a[4] = a[4] * 1000;
  a[6].zero_();
  const at::Tensor w = at::randn({n, k}) * 0.05, bias = at::randn({n});
  auto packed = Quantize(w);
  const int threads = at::get_num_threads();
  at::set_num_threads(1);
  const at::Tensor one = GemmInt8(a, *packed, bias, /*extra_c_columns=*/5, kernel());
  at::set_num_threads(2);
  const at::Tensor two = GemmInt8(a, *packed, bias, 0, kernel());
  at::set_num_threads(threads);
  EXPECT_FALSE(at::any(at::isnan(one)).item<bool>());
  EXPECT_TRUE(at::equal(one, two));
  EXPECT_TRUE(ExactAfterQuantizing(one, a.contiguous(), *packed, bias));
  EXPECT_TRUE(at::equal(one[6], bias));
  for (int64_t i : {0, 5, 7, 69}) {
    const at::Tensor alone = GemmInt8(a.narrow(0, i, 1).contiguous(), *packed, bias, 0, kernel());
    EXPECT_TRUE(at::equal(alone[0], one[i])) << i;
  }
  // Against the float product: about 1% of the output's norm (8 bits each side), not exact.
  const at::Tensor plain = at::linear(a, w, bias);
  const double err = ((one - plain).norm() / plain.norm()).item<double>();
  EXPECT_LT(err, 0.02);
  EXPECT_GT(err, 1e-6);
}

// The largest products: rows of the largest uint8 values (255, and 0 beside them) against weights
// at the level, so that each pair of products is 2 x 255 x 127 = 64770 (past int16: a kernel that
// added such pairs in 16 bits, as VPMADDUBSW does, would saturate and be far off the exact result)
// or, on 7-bit weights, 2 x 255 x 63 = 32130, just inside it.
TEST_P(Int8GemmTest, TheLargestProductsAreExact) {
  c10::InferenceMode guard;
  const int64_t m = 9, n = 40, k = 256;
  at::Tensor a = at::full({m, k}, 3.0f);  // all positive: zero point 0, every value 255
  a[1] = -a[1];                            // all negative: zero point 255, every value 0
  a[2].narrow(0, 0, k / 2).fill_(-3.0f);   // half and half
  at::Tensor w = at::ones({n, k});
  w[1] = -w[1];
  w[2].narrow(0, 0, k / 2).fill_(-1.0f);
  w[3].narrow(0, 1, k - 1).fill_(0.5f);  // one value at the level, the rest at half of it
  const at::Tensor bias = at::randn({n});
  auto packed = Quantize(w);
  EXPECT_TRUE(ExactAfterQuantizing(GemmInt8(a, *packed, bias, 0, kernel()), a, *packed, bias));
  // Row 0 times feature 0 is k x 3 x 1.
  EXPECT_NEAR(GemmInt8(a, *packed, at::Tensor(), 0, kernel())[0][0].item<float>(), 3.0f * k, 1e-3 * k);
}

// The int32 sums are exact, so every kernel the CPU runs gives the same float32 results on the
// same weights, 8-bit or 7-bit, bit for bit.
TEST(Int8GemmKernelsTest, EveryKernelGivesTheSameBits) {
  std::vector<Int8Kernel> kernels;
  for (Int8Kernel kernel : {Int8Kernel::kAmx, Int8Kernel::kVnni, Int8Kernel::kAvx2}) {
    if (PackedInt8Weights::Supports(kernel)) kernels.push_back(kernel);
  }
  if (kernels.size() < 2) GTEST_SKIP() << "this CPU runs only one int8 kernel";
  c10::InferenceMode guard;
  at::manual_seed(14);
  for (int64_t m : {1, 9, 40, 300}) {
    const at::Tensor a = at::randn({m, 768}), w = at::randn({200, 768}) * 0.05, bias = at::randn({200});
    for (int level : {PackedInt8Weights::kEightBitLevel, PackedInt8Weights::kSevenBitLevel}) {
      auto packed = QuantizeWeight(w, level);
      const at::Tensor first = GemmInt8(a, *packed, bias, 0, kernels[0]);
      for (Int8Kernel kernel : kernels) {
        EXPECT_TRUE(at::equal(first, GemmInt8(a, *packed, bias, 0, kernel))) << m << " " << KernelName(kernel);
      }
    }
  }
}

}  // namespace
}  // namespace relserve
