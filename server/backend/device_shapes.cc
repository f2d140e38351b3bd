#include "server/backend/device_shapes.h"

#include <algorithm>

namespace relserve {

int DeviceBatchLength(int length, int max_length) {
  const int step = length <= 256 ? 16 : length <= 1024 ? 64 : 256;
  const int rounded = (length + step - 1) / step * step;
  return std::max(length, std::min(rounded, max_length));
}

std::vector<int> DeviceBatchLengths(int max_length) {
  std::vector<int> lengths;
  for (int length = std::min(16, max_length); length >= 1;
       length = std::min(DeviceBatchLength(length + 1, max_length), max_length)) {
    lengths.push_back(length);
    if (length == max_length) break;
  }
  return lengths;
}

namespace {

// 1, 2, 3, 4, 6, 8, 12, 16, ...: up to 4 every size, then 2^k and 1.5 * 2^k.
int NextSize(int size) {
  if (size < 4) return size + 1;
  int power = 4;
  while (power * 2 <= size) power *= 2;
  return size < power + power / 2 ? power + power / 2 : power * 2;
}

}  // namespace

int DeviceBatchSize(int batch, int max_batch) {
  int size = 1;
  while (size < batch) size = NextSize(size);
  return std::max(batch, std::min(size, max_batch));
}

std::vector<int> DeviceBatchSizes(int max_batch) {
  std::vector<int> sizes;
  for (int size = 1; size < max_batch; size = NextSize(size)) sizes.push_back(size);
  if (max_batch >= 1) sizes.push_back(max_batch);
  return sizes;
}

}  // namespace relserve
