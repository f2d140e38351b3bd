#ifndef RELSERVE_SERVER_MODEL_KERNELS_NEEDED_COLUMNS_H_
#define RELSERVE_SERVER_MODEL_KERNELS_NEEDED_COLUMNS_H_

#include <cstdint>

namespace relserve {

// The columns of a product's rows that its caller reads: row i's results in [first[i], end[i]),
// the rest of the row left unspecified. Given to SerialGemm or SerialGemmBFloat16, it lets them
// skip each panel of output features that no row of a register tile needs; each result they do
// compute is the same sum, in the same order, as without it. DeBERTa's relative terms are the case:
// a query's row of c2p is read only at the L table rows of its own keys' distances, a band of L of
// the 2L - 1 the product has (RelativeTermColumns, relative_softmax.h). Default: every column.
struct NeededColumns {
  const int32_t* first = nullptr;  // one per row of the product, or null: every column
  const int32_t* end = nullptr;

  bool every() const { return first == nullptr; }
  // Whether a row in [r0, r1) needs a column in [c0, c1).
  bool Touches(int64_t r0, int64_t r1, int64_t c0, int64_t c1) const {
    if (every()) return true;
    for (int64_t r = r0; r < r1; ++r) {
      if (first[r] < c1 && end[r] > c0 && first[r] < end[r]) return true;
    }
    return false;
  }
};

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_KERNELS_NEEDED_COLUMNS_H_
