#ifndef RELSERVE_CLIENT_BENCH_WORKLOAD_H_
#define RELSERVE_CLIENT_BENCH_WORKLOAD_H_

#include <random>
#include <string>

#include "absl/status/statusor.h"
#include "client/client_flags.h"
#include "client/length_distribution.h"
#include "relserve/v1/encoder.pb.h"

namespace relserve::client {

// The requests `relserve-client bench` sends: --inputs-per-request sequences whose lengths
// come from --lengths. With --input tokens a sequence of length N is N token ids, [CLS]=1,
// N-2 ids drawn from [5, --vocab), [SEP]=2 (a DeBERTa-style frame, as the serving benchmark
// always used), so the server computes exactly the drawn lengths; with --input text it is
// N-2 common English words, about N tokens after tokenization. Rerank sends text: a short
// fixed query and documents of the drawn lengths.
class BenchWorkload {
 public:
  static absl::StatusOr<BenchWorkload> Create(const BenchOptions& bench, const RequestOptions& request);

  v1::EmbedRequest MakeEmbed(std::mt19937_64& rng) const;
  v1::ClassifyRequest MakeClassify(std::mt19937_64& rng) const;
  v1::RerankRequest MakeRerank(std::mt19937_64& rng) const;

  const LengthDistribution& lengths() const { return lengths_; }

 private:
  BenchWorkload(BenchOptions bench, RequestOptions request, LengthDistribution lengths)
      : bench_(std::move(bench)), request_(std::move(request)), lengths_(std::move(lengths)) {}

  v1::Input MakeInput(std::mt19937_64& rng) const;
  std::string MakeText(int length, std::mt19937_64& rng) const;

  BenchOptions bench_;
  RequestOptions request_;
  LengthDistribution lengths_;
};

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_BENCH_WORKLOAD_H_
