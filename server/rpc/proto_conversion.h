#ifndef RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_
#define RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_

#include <vector>

#include "relserve/v1/encoder.pb.h"
#include "server/serving/serving_types.h"

namespace relserve {

// relserve.v1 messages to and from the serving layer's values, field for field.
EmbedRequest FromProto(const v1::EmbedRequest& r);
EmbedTokensRequest FromProto(const v1::EmbedTokensRequest& r);
RerankRequest FromProto(const v1::RerankRequest& r);
ClassifyRequest FromProto(const v1::ClassifyRequest& r);
TokenizeRequest FromProto(const v1::TokenizeRequest& r);

void ToProto(EmbedResult&& r, v1::EmbedResponse* out);
void ToProto(EmbedTokensResult&& r, v1::EmbedTokensResponse* out);
void ToProto(RerankResult&& r, v1::RerankResponse* out);
void ToProto(ClassifyResult&& r, v1::ClassifyResponse* out);
void ToProto(TokenizeResult&& r, v1::TokenizeResponse* out);
void ToProto(const std::vector<ModelDescription>& models, const std::string& default_model,
             v1::ListModelsResponse* out);

}  // namespace relserve

#endif  // RELSERVE_SERVER_RPC_PROTO_CONVERSION_H_
