#include "client/arrival_schedule.h"

namespace relserve::client {

ArrivalSchedule::ArrivalSchedule(double rate, const std::string& arrivals, uint64_t seed)
    : rate_(rate), poisson_(arrivals == "poisson"), rng_(seed), gap_(rate) {}

double ArrivalSchedule::Next() {
  if (poisson_) {
    t_ += gap_(rng_);
    return t_;
  }
  // Multiplying instead of adding keeps a long constant schedule free of accumulated rounding.
  return static_cast<double>(n_++) / rate_;
}

}  // namespace relserve::client
