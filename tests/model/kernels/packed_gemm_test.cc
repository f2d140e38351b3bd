// The packed float32 GEMM against ATen's linear in float64, on shapes that exercise every row
// tile (1-12 rows and several blocks), partial panels and half panels, k not a multiple of the
// pass length, strided inputs and outputs, with and without bias: each kernel this CPU runs
// (AVX-512, AVX2), and the two against each other bit for bit where it runs both.
#include "server/model/kernels/packed_gemm.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <tuple>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/tensor_max_abs_diff.h"

namespace relserve {
namespace {

using testing::MaxAbsDiff;

// The kernels this CPU runs.
std::vector<Float32Kernel> Kernels() {
  std::vector<Float32Kernel> kernels;
  for (Float32Kernel kernel : {Float32Kernel::kAvx512, Float32Kernel::kAvx2}) {
    if (PackedWeights::Supports(kernel)) kernels.push_back(kernel);
  }
  return kernels;
}

at::Tensor Reference(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias) {
  at::Tensor out = at::matmul(a.to(at::kDouble), w.to(at::kDouble).t());
  return bias.defined() ? out + bias.to(at::kDouble) : out;
}

// a [m, k] may be a strided view; c is written into a wider buffer, so that ldc > n.
at::Tensor Gemm(const at::Tensor& a, const at::Tensor& w, const at::Tensor& bias, Float32Kernel kernel,
                int64_t extra_c_columns = 0) {
  auto packed = PackedWeights::Pack(w.data_ptr<float>(), w.size(0), w.size(1), w.stride(0), kernel);
  EXPECT_EQ(packed->kernel(), kernel);
  at::Tensor c = at::full({a.size(0), w.size(0) + extra_c_columns}, 7.0f);
  PackedGemm(a.data_ptr<float>(), a.size(0), a.size(0) > 1 ? a.stride(0) : a.size(1), *packed,
             bias.defined() ? bias.data_ptr<float>() : nullptr, c.data_ptr<float>(), c.stride(0));
  if (extra_c_columns > 0) {
    // Columns past n are never written.
    EXPECT_TRUE(at::all(c.narrow(1, w.size(0), extra_c_columns) == 7.0f).item<bool>());
  }
  return c.narrow(1, 0, w.size(0));
}

TEST(PackedGemmTest, MatchesLinearOnEveryTileAndPanelEdge) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(3);
  for (Float32Kernel kernel : Kernels()) {
    for (int64_t m : {1, 2, 5, 6, 7, 11, 12, 13, 25, 191, 192, 193, 400}) {
      for (auto [n, k] : {std::pair<int64_t, int64_t>{1, 1}, {7, 3}, {9, 5}, {16, 17}, {17, 9}, {31, 64}, {32, 255},
                          {33, 256}, {50, 257}, {96, 600}}) {
        at::Tensor a = at::randn({m, k}), w = at::randn({n, k}), bias = at::randn({n});
        EXPECT_LT(MaxAbsDiff(Gemm(a, w, bias, kernel), Reference(a, w, bias)), 2e-4)
            << Float32KernelName(kernel) << " " << m << "x" << n << "x" << k;
        EXPECT_LT(MaxAbsDiff(Gemm(a, w, at::Tensor(), kernel), Reference(a, w, at::Tensor())), 2e-4)
            << Float32KernelName(kernel) << " " << m << "x" << n << "x" << k;
      }
    }
  }
}

TEST(PackedGemmTest, KernelsGiveTheSameBits) {
  if (!PackedWeights::Supports(Float32Kernel::kAvx512) || !PackedWeights::Supports(Float32Kernel::kAvx2)) {
    GTEST_SKIP() << "this CPU does not run both kernels";
  }
  c10::InferenceMode guard;
  at::manual_seed(6);
  for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{7, 50, 257}, {128, 96, 600}, {193, 33, 100}}) {
    at::Tensor a = at::randn({m, k}), w = at::randn({n, k}), bias = at::randn({n});
    EXPECT_TRUE(at::equal(Gemm(a, w, bias, Float32Kernel::kAvx512), Gemm(a, w, bias, Float32Kernel::kAvx2)))
        << m << "x" << n << "x" << k;
  }
}

TEST(PackedGemmTest, BestIsAvx512WhereTheCpuHasIt) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  EXPECT_EQ(PackedWeights::Best(), PackedWeights::Supports(Float32Kernel::kAvx512) ? Float32Kernel::kAvx512
                                                                                     : Float32Kernel::kAvx2);
  EXPECT_EQ(PackedWeights::Supports(Float32Kernel::kAvx2),
            __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"));
  // Weights are packed for Best()'s tiles unless told otherwise.
  const float w[6] = {1, 2, 3, 4, 5, 6};
  EXPECT_EQ(PackedWeights::Pack(w, 2, 3, 3)->kernel(), PackedWeights::Best());
}

// The two kernels' panels hold the same values in different places: the AVX-512 tiles read a
// panel row by row, the AVX2 tiles each 256-step slice half a panel at a time. Packing works on
// any CPU, so the places are checked here whatever runs.
TEST(PackedGemmTest, EachKernelsPanelsLieAsItsTilesReadThem) {
  c10::InferenceMode guard;
  const int64_t n = 40, k = 300;  // two panels, the second of 8 features; slices of 256 and 44
  at::Tensor w = at::arange(n * k, at::kFloat).reshape({n, k});
  const float* v = w.data_ptr<float>();
  auto wide = PackedWeights::Pack(v, n, k, k, Float32Kernel::kAvx512);
  auto halves = PackedWeights::Pack(v, n, k, k, Float32Kernel::kAvx2);
  for (int64_t j = 0; j < n; ++j) {
    const int64_t p = j / 32, f = j % 32;
    for (int64_t kk = 0; kk < k; ++kk) {
      ASSERT_EQ(wide->panel(p)[kk * 32 + f], v[j * k + kk]) << j << " " << kk;
      const int64_t k0 = kk / 256 * 256, kc = std::min<int64_t>(256, k - k0);
      ASSERT_EQ(halves->panel(p)[k0 * 32 + (f / 16) * kc * 16 + (kk - k0) * 16 + f % 16], v[j * k + kk])
          << j << " " << kk;
    }
  }
  // The padding of the last panel is zero in both.
  for (int64_t f = n % 32; f < 32; ++f) {
    for (int64_t kk = 0; kk < k; ++kk) ASSERT_EQ(wide->panel(1)[kk * 32 + f], 0.f) << f << " " << kk;
  }
  for (int64_t i = 0; i < k * 32; ++i) {
    // Features 8-15 of the second panel's first half and all of its second half.
    const int64_t k0 = i / (256 * 32) * 256, kc = std::min<int64_t>(256, k - k0), in_slice = i - k0 * 32;
    const int64_t f = in_slice / (kc * 16) * 16 + in_slice % 16;
    if (f >= n % 32) {
      ASSERT_EQ(halves->panel(1)[i], 0.f) << i;
    }
  }
}

TEST(PackedGemmTest, StridedRowsAndWiderOutput) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(4);
  at::Tensor wide = at::randn({37, 300});
  at::Tensor a = wide.narrow(1, 20, 260);        // rows 300 floats apart
  at::Tensor w_wide = at::randn({70, 280});
  at::Tensor w = w_wide.narrow(1, 5, 260);       // weight rows 280 apart
  at::Tensor bias = at::randn({70});
  for (Float32Kernel kernel : Kernels()) {
    EXPECT_LT(MaxAbsDiff(Gemm(a, w, bias, kernel, /*extra_c_columns=*/9), Reference(a, w, bias)), 2e-4)
        << Float32KernelName(kernel);
  }
}

TEST(PackedGemmTest, ZeroDepthGivesTheBias) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::Tensor a = at::empty({3, 0}), w = at::empty({5, 0}), bias = at::arange(5, at::kFloat);
  auto packed = PackedWeights::Pack(w.data_ptr<float>(), 5, 0, 0);
  at::Tensor c = at::full({3, 5}, 7.0f);
  PackedGemm(a.data_ptr<float>(), 3, 0, *packed, bias.data_ptr<float>(), c.data_ptr<float>(), 5);
  EXPECT_TRUE(at::equal(c, bias.expand({3, 5})));
}

TEST(PackedGemmTest, ThreadsGiveTheSameBits) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(5);
  const int before = at::get_num_threads();
  // 500 rows: three blocks of 167, 167 and 166; 400: 134, 134 and 132, the last with a tile of
  // rows fewer than the others (the AVX2 kernel packs each block's rows by tiles of 6).
  for (int64_t m : {500, 400}) {
    for (Float32Kernel kernel : Kernels()) {
      at::Tensor a = at::randn({m, 384}), w = at::randn({1000, 384}), bias = at::randn({1000});
      at::set_num_threads(1);
      at::Tensor one = Gemm(a, w, bias, kernel).clone();
      at::set_num_threads(2);
      at::Tensor two = Gemm(a, w, bias, kernel).clone();
      // Each result is one thread's sum in a fixed order, whoever computes it.
      EXPECT_TRUE(at::equal(one, two)) << Float32KernelName(kernel) << " " << m;
      EXPECT_LT(MaxAbsDiff(one, Reference(a, w, bias)), 5e-4) << Float32KernelName(kernel) << " " << m;
    }
  }
  at::set_num_threads(before);
}

// Inputs past 768 rows run 768 at a time on either kernel's tiles (so that the packed rows' buffer
// stays bounded): the answers are those of each row on its own, across every chunk's edge.
TEST(PackedGemmTest, LongInputsGiveEachRowsOwnAnswer) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(8);
  const int64_t m = 1700;  // 768 + 768 + 164
  at::Tensor a = at::randn({m, 300}), w = at::randn({70, 300}), bias = at::randn({70});
  for (Float32Kernel kernel : Kernels()) {
    const at::Tensor all = Gemm(a, w, bias, kernel).clone();
    EXPECT_LT(MaxAbsDiff(all, Reference(a, w, bias)), 2e-4) << Float32KernelName(kernel);
    for (int64_t r0 : {int64_t{760}, int64_t{1530}}) {
      // Rows on both sides of a chunk's edge, multiplied on their own: the same bits.
      const at::Tensor rows = a.narrow(0, r0, 12).contiguous();
      EXPECT_TRUE(at::equal(Gemm(rows, w, bias, kernel), all.narrow(0, r0, 12)))
          << Float32KernelName(kernel) << " rows from " << r0;
    }
  }
}

// Every row's answer is its own, bit for bit, whatever the rows beside it: at every count of rows
// from 1 to 40 (every way a block of tiles can end) and at 128 and 130, the rows multiplied
// together equal each row multiplied alone. Strided rows (lda > k) and a depth of two passes and a
// part (600).
TEST(PackedGemmTest, EachRowsAnswerIsItsOwnAtEveryBlockEnd) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(9);
  const at::Tensor w = at::randn({40, 600}), bias = at::randn({40});
  const at::Tensor wide = at::randn({130, 610});
  const at::Tensor a = wide.narrow(1, 3, 600);  // rows 610 floats apart
  for (Float32Kernel kernel : Kernels()) {
    std::vector<at::Tensor> alone;
    for (int64_t r = 0; r < 130; ++r) alone.push_back(Gemm(a.narrow(0, r, 1), w, bias, kernel).clone());
    std::vector<int64_t> counts = {128, 130};
    for (int64_t m = 1; m <= 40; ++m) counts.push_back(m);
    for (int64_t m : counts) {
      const at::Tensor together = Gemm(a.narrow(0, 0, m), w, bias, kernel);
      for (int64_t r = 0; r < m; ++r) {
        ASSERT_TRUE(at::equal(together.narrow(0, r, 1), alone[r]))
            << Float32KernelName(kernel) << " row " << r << " of " << m;
      }
    }
    EXPECT_LT(MaxAbsDiff(Gemm(a, w, bias, kernel), Reference(a, w, bias)), 5e-4) << Float32KernelName(kernel);
  }
}

// PackedGemm packs the rows first (PackRowTiles, in each kernel's tiles of rows); SerialGemm reads
// them as they lie. Both sum each result in the same order, so on the same weights they give the
// same bits: the packed rows hold exactly the rows, on every tile's and pass's edge.
TEST(PackedGemmTest, PackedRowsAndRowsAsTheyLieGiveTheSameBits) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(10);
  for (Float32Kernel kernel : Kernels()) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 32, 64}, {13, 40, 300}, {128, 64, 768},
                           {150, 33, 513}}) {
      const at::Tensor wide = at::randn({m, k + 5});
      const at::Tensor a = wide.narrow(1, 2, k);  // rows k + 5 floats apart
      const at::Tensor w = at::randn({n, k});
      const at::Tensor packed = Gemm(a, w, at::Tensor(), kernel).clone();
      at::Tensor serial = at::empty({m, n});
      SerialGemm(a.data_ptr<float>(), m, k + 5, w.data_ptr<float>(), n, k, /*b_row=*/k, /*b_col=*/1,
                 serial.data_ptr<float>(), n, kernel);
      EXPECT_TRUE(at::equal(packed, serial)) << Float32KernelName(kernel) << " " << m << "x" << n << "x" << k;
    }
  }
}

// SerialGemm reads b either as [n, k] rows (a · bᵀ, attention's q · kᵀ) or as [k, n] (a · b, the
// probabilities times v), packs it on the calling thread and runs the same tiles.
TEST(PackedGemmTest, SerialGemmInBothLayouts) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(7);
  for (Float32Kernel kernel : Kernels()) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {5, 17, 64}, {128, 128, 64},
                           {13, 40, 300}, {200, 64, 33}}) {
      at::Tensor a = at::randn({m, k});
      at::Tensor rows = at::randn({n, k});  // b as [n, k]
      at::Tensor cols = at::randn({k, n});  // b as [k, n]
      at::Tensor c = at::full({m, n + 3}, 7.0f);
      SerialGemm(a.data_ptr<float>(), m, k, rows.data_ptr<float>(), n, k, /*b_row=*/k, /*b_col=*/1,
                 c.data_ptr<float>(), n + 3, kernel);
      EXPECT_LT(MaxAbsDiff(c.narrow(1, 0, n), at::matmul(a.to(at::kDouble), rows.to(at::kDouble).t())), 2e-4)
          << Float32KernelName(kernel) << " a·bT " << m << "x" << n << "x" << k;
      EXPECT_TRUE(at::all(c.narrow(1, n, 3) == 7.0f).item<bool>());
      SerialGemm(a.data_ptr<float>(), m, k, cols.data_ptr<float>(), n, k, /*b_row=*/1, /*b_col=*/n,
                 c.data_ptr<float>(), n + 3, kernel);
      EXPECT_LT(MaxAbsDiff(c.narrow(1, 0, n), at::matmul(a.to(at::kDouble), cols.to(at::kDouble))), 2e-4)
          << Float32KernelName(kernel) << " a·b " << m << "x" << n << "x" << k;
    }
  }
}

// With NeededColumns, SerialGemm gives each row's needed columns the same bits as without, and leaves
// alone every panel of 32 columns that no row of a 12-row tile needs (here a band that moves right
// by one column a row, as DeBERTa's relative terms do, plus rows that need nothing).
TEST(PackedGemmTest, SerialGemmOnNeededColumnsOnly) {
  if (!PackedWeights::Supported()) GTEST_SKIP() << "neither AVX-512F nor AVX2 with FMA on this CPU";
  c10::InferenceMode guard;
  at::manual_seed(8);
  constexpr int64_t kPanel = PackedWeights::kPanelWidth, kTileRows = 12;
  for (Float32Kernel kernel : Kernels()) {
    for (auto [m, n, k] : {std::tuple<int64_t, int64_t, int64_t>{128, 255, 64}, {30, 100, 33}, {200, 399, 16}}) {
      SCOPED_TRACE(::testing::Message() << Float32KernelName(kernel) << " " << m << "x" << n << "x" << k);
      const at::Tensor a = at::randn({m, k}), b = at::randn({n, k});
      std::vector<int32_t> first(m), end(m);
      const int64_t width = n - m + 1;
      for (int64_t i = 0; i < m; ++i) {
        first[i] = static_cast<int32_t>(std::max<int64_t>(0, i));
        end[i] = static_cast<int32_t>(std::min<int64_t>(n, i + std::max<int64_t>(width, 1)));
        if (i % 17 == 5) end[i] = first[i];  // needs nothing
      }
      at::Tensor all = at::empty({m, n});
      SerialGemm(a.data_ptr<float>(), m, k, b.data_ptr<float>(), n, k, k, 1, all.data_ptr<float>(), n, kernel);
      const float sentinel = 12345.0f;
      at::Tensor some = at::full({m, n}, sentinel);
      SerialGemm(a.data_ptr<float>(), m, k, b.data_ptr<float>(), n, k, k, 1, some.data_ptr<float>(), n, kernel,
                 NeededColumns{first.data(), end.data()});
      int64_t skipped = 0;
      for (int64_t i = 0; i < m; ++i) {
        for (int64_t j = first[i]; j < end[i]; ++j) ASSERT_EQ(some[i][j].item<float>(), all[i][j].item<float>()) << i << "," << j;
      }
      for (int64_t t = 0; t < m; t += kTileRows) {
        const int64_t rows = std::min(kTileRows, m - t);
        for (int64_t c0 = 0; c0 < n; c0 += kPanel) {
          const int64_t c1 = std::min(n, c0 + kPanel);
          bool touched = false;
          for (int64_t i = t; i < t + rows; ++i) touched = touched || (first[i] < c1 && end[i] > c0 && first[i] < end[i]);
          if (!touched) {
            EXPECT_TRUE(at::all(some.narrow(0, t, rows).narrow(1, c0, c1 - c0) == sentinel).item<bool>())
                << "rows " << t << " columns " << c0;
            ++skipped;
          }
        }
      }
      EXPECT_GT(skipped, 0);  // the band leaves whole panels out
    }
  }
}

}  // namespace
}  // namespace relserve
