#include "server/tokenizer/truncation.h"

#include <algorithm>
#include <cstdint>

namespace relserve {

TruncatedLengths TruncateLongestFirst(int first, int second, int budget) {
  if (static_cast<int64_t>(first) + second <= budget) return {first, second};
  // Closed form of the one-token-at-a-time loop: first cut the longer text down to the
  // shorter one's length (or until the budget is met), then share what is left, the first
  // text keeping the odd token because a tie cuts the second.
  const int shorter = std::min(first, second);
  if (budget - shorter >= shorter) {
    // Only the longer text needs cutting, and it stays at least as long as the shorter one.
    return first > second ? TruncatedLengths{budget - second, second}
                          : TruncatedLengths{first, budget - first};
  }
  return {budget - budget / 2, budget / 2};
}

TruncatedLengths TruncateOnlyFirst(int first, int second, int budget) {
  if (static_cast<int64_t>(first) + second <= budget) return {first, second};
  return {std::clamp(budget - second, 0, first), second};
}

int FirstKeptToken(int length, int kept, TruncationDirection direction) {
  return direction == TruncationDirection::kLeft ? length - kept : 0;
}

}  // namespace relserve
