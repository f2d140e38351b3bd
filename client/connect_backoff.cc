#include "client/connect_backoff.h"

#include <algorithm>
#include <cmath>

namespace relserve::client {

bool IsConnectionFailure(grpc::StatusCode code, grpc_connectivity_state state) {
  return code == grpc::StatusCode::UNAVAILABLE && state != GRPC_CHANNEL_READY;
}

std::chrono::milliseconds ConnectBackoff::NextDelay() {
  failures_ = std::min(failures_ + 1, 1000);  // long past the cap; keeps the count finite
  const double max_ms = static_cast<double>(policy_.max.count());
  // The exponent stops growing once the cap is reached, so the product cannot overflow.
  double base_ms = static_cast<double>(policy_.initial.count());
  for (int i = 1; i < failures_ && base_ms < max_ms; ++i) base_ms *= policy_.multiplier;
  base_ms = std::min(base_ms, max_ms);
  std::uniform_real_distribution<double> factor(1 - policy_.jitter, 1 + policy_.jitter);
  const double ms = std::clamp(base_ms * factor(rng_), 0.0, max_ms);
  return std::chrono::milliseconds(static_cast<int64_t>(std::llround(ms)));
}

}  // namespace relserve::client
