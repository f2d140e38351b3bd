#ifndef RELSERVE_CLIENT_RESPONSE_JSON_H_
#define RELSERVE_CLIENT_RESPONSE_JSON_H_

#include <string>

#include <nlohmann/json.hpp>

#include "relserve/v1/encoder.pb.h"

namespace relserve::client {

// Responses as JSON objects with the proto's field names (snake_case), every field present,
// integers as numbers and floats at float precision ("0.1", not "0.10000000149011612").
nlohmann::ordered_json ToJson(const v1::EmbedResponse& r);
nlohmann::ordered_json ToJson(const v1::EmbedTokensResponse& r);
nlohmann::ordered_json ToJson(const v1::RerankResponse& r);
nlohmann::ordered_json ToJson(const v1::ClassifyResponse& r);
nlohmann::ordered_json ToJson(const v1::ZeroShotClassifyResponse& r);
nlohmann::ordered_json ToJson(const v1::ClassifyTokensResponse& r);
nlohmann::ordered_json ToJson(const v1::TokenizeResponse& r);
nlohmann::ordered_json ToJson(const v1::ListModelsResponse& r);

// The name of a gRPC status code ("NOT_FOUND"), as gRPC's documentation and other clients
// spell it.
std::string StatusCodeName(int code);

// {"error": {"code": "NOT_FOUND", "message": "..."}}: how every failure is printed.
nlohmann::ordered_json ErrorJson(const std::string& code_name, const std::string& message);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_RESPONSE_JSON_H_
