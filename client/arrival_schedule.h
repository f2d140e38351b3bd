#ifndef RELSERVE_CLIENT_ARRIVAL_SCHEDULE_H_
#define RELSERVE_CLIENT_ARRIVAL_SCHEDULE_H_

#include <cstdint>
#include <random>
#include <string>

namespace relserve::client {

// When an open-loop load starts each request: `rate` requests a second, either evenly spaced
// ("constant") or as a Poisson process ("poisson": exponential gaps with mean 1 / rate, as
// independent callers arrive). Next() gives the start times in seconds from the beginning of
// the run, increasing; the same seed gives the same schedule. Not thread-safe.
class ArrivalSchedule {
 public:
  ArrivalSchedule(double rate, const std::string& arrivals, uint64_t seed);

  double Next();

 private:
  double rate_;
  bool poisson_;
  std::mt19937_64 rng_;
  std::exponential_distribution<double> gap_;
  double t_ = 0;
  int64_t n_ = 0;
};

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_ARRIVAL_SCHEDULE_H_
