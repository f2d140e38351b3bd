#ifndef RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_
#define RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_

#include <vector>

#include "absl/status/statusor.h"
#include "relserve/v1/encoder.pb.h"
#include "server/serving/serving_types.h"
#include "server/serving/token_classification.h"

namespace relserve {

// relserve.v1 messages to and from the serving layer's values, field for field. A request is
// INVALID_ARGUMENT when a field holds a value its type does not define (an enum number from a
// newer proto), naming the field.
absl::StatusOr<EmbedRequest> FromProto(const v1::EmbedRequest& r);
absl::StatusOr<EmbedTokensRequest> FromProto(const v1::EmbedTokensRequest& r);
absl::StatusOr<RerankRequest> FromProto(const v1::RerankRequest& r);
absl::StatusOr<ClassifyRequest> FromProto(const v1::ClassifyRequest& r);
absl::StatusOr<TokenizeRequest> FromProto(const v1::TokenizeRequest& r);
absl::StatusOr<ZeroShotRequest> FromProto(const v1::ZeroShotClassifyRequest& r);
absl::StatusOr<TokenClassifyRequest> FromProto(const v1::ClassifyTokensRequest& r);

void ToProto(EmbedResult&& r, v1::EmbedResponse* out);
void ToProto(EmbedTokensResult&& r, v1::EmbedTokensResponse* out);
void ToProto(RerankResult&& r, v1::RerankResponse* out);
void ToProto(ClassifyResult&& r, v1::ClassifyResponse* out);
void ToProto(TokenizeResult&& r, v1::TokenizeResponse* out);
void ToProto(ZeroShotResult&& r, v1::ZeroShotClassifyResponse* out);
void ToProto(TokenClassifyResult&& r, v1::ClassifyTokensResponse* out);
void ToProto(const std::vector<ModelDescription>& models, const std::string& default_model,
             v1::ListModelsResponse* out);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_
