#ifndef RELSERVE_SERVER_MODEL_MODEL_FLOPS_H_
#define RELSERVE_SERVER_MODEL_MODEL_FLOPS_H_

#include <cstdint>
#include <string>

#include "server/backend/model_types.h"
#include "server/model_config/model_config.h"

namespace relserve {

// Multiply-add FLOPs (2 per MAC) per token of one forward pass over sequences of `length`, as
// the config's family counts them (FamilyDescriptor::FlopsPerToken). The numerator of
// model-FLOPs utilisation.
double EncoderFlopsPerToken(const ModelConfig& config, int64_t length);

// FLOP/s of a square matrix product of size n in `dtype` (kInt8: the engine's dynamically
// quantized product, CPU only)
// on `device` ("cpu", "cuda", "cuda:N"; 0 when unusable), with the current thread settings,
// measured for about `seconds`.
double MeasureMatmulFlops(DType dtype, int64_t n, double seconds, const std::string& device = "cpu");

}  // namespace relserve

#endif  // RELSERVE_SERVER_MODEL_MODEL_FLOPS_H_
