#ifndef RELSERVE_CLIENT_REQUEST_BUILDING_H_
#define RELSERVE_CLIENT_REQUEST_BUILDING_H_

#include <string>
#include <vector>

#include "client/client_flags.h"
#include "relserve/v1/encoder.pb.h"

namespace relserve::client {

// Request messages from parsed inputs and the flags that mirror their fields.
v1::EmbedRequest BuildEmbedRequest(const RequestOptions& options, std::vector<v1::Input> inputs);
v1::EmbedTokensRequest BuildEmbedTokensRequest(const RequestOptions& options, std::vector<v1::Input> inputs);
// ZeroShotClassify: the texts against --labels.
v1::ZeroShotClassifyRequest BuildZeroShotRequest(const RequestOptions& options, const std::vector<std::string>& texts);
// ClassifyTokens: the texts with --aggregation-strategy, --ignore-labels and --stride.
v1::ClassifyTokensRequest BuildClassifyTokensRequest(const RequestOptions& options, const std::vector<std::string>& texts);
v1::ClassifyRequest BuildClassifyRequest(const RequestOptions& options, std::vector<v1::Input> inputs);
v1::TokenizeRequest BuildTokenizeRequest(const RequestOptions& options, std::vector<v1::Input> inputs);
v1::RerankRequest BuildRerankRequest(const RequestOptions& options, const std::string& query,
                                     const std::vector<std::string>& documents);

}  // namespace relserve::client

#endif  // RELSERVE_CLIENT_REQUEST_BUILDING_H_
