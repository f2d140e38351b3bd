#ifndef RELSERVE_SERVER_MODEL_KERNELS_EXP_NON_POSITIVE_H_
#define RELSERVE_SERVER_MODEL_KERNELS_EXP_NON_POSITIVE_H_

#include <cstdint>
#include <cstring>

namespace relserve {

// exp(x) for x <= 0 (and -inf), Cephes' expf: Cody-Waite reduction and a degree-5
// polynomial, relative error below 2e-7. Written so that the compiler vectorizes it: the
// rounding is the 1.5 * 2^23 trick, whose sum also holds the rounded integer in its low bits,
// and the power of two is built in the exponent bits.
// Arguments below -87 (e^-87 < 1.7e-38) give 0, which also makes padded keys (-inf) exactly 0:
// the steps run on every argument and that 0 is chosen in the result's bits at the end. Clamping
// the argument first (a choice between floats) or choosing between float results made GCC, whose
// default -ftrapping-math keeps it from running floating-point steps a branch would skip, branch
// around the polynomial, and the loop then ran scalar on every CPU without AVX-512's masks.
__attribute__((always_inline)) inline float ExpNonPositive(float x) {
  const float shifted = x * 1.44269504088896341f + 12582912.0f;
  uint32_t shifted_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof(shifted_bits));
  const float r = shifted - 12582912.0f;
  float g = x - r * 0.693359375f;
  g = g + r * 2.12194440e-4f;
  float y = 1.9875691500e-4f;
  y = y * g + 1.3981999507e-3f;
  y = y * g + 8.3334519073e-3f;
  y = y * g + 4.1665795894e-2f;
  y = y * g + 1.6666665459e-1f;
  y = y * g + 5.0000001201e-1f;
  y = y * g * g + g + 1.0f;
  // 2^r: r (an integer in [-126, 0] where it counts) is shifted_bits - 0x4B400000, the bits of 1.5 * 2^23.
  const uint32_t bits = (shifted_bits - 0x4B400000u + 127u) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  const float e = y * scale;
  uint32_t e_bits;
  std::memcpy(&e_bits, &e, sizeof(e_bits));
  e_bits &= 0u - static_cast<uint32_t>(!(x < -87.0f));  // all ones, or 0 below -87 (NaN stays NaN)
  float out;
  std::memcpy(&out, &e_bits, sizeof(out));
  return out;
}

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_EXP_NON_POSITIVE_H_
