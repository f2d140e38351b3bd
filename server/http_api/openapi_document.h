#ifndef RELSERVE_SERVER_HTTP_API_OPENAPI_DOCUMENT_H_
#define RELSERVE_SERVER_HTTP_API_OPENAPI_DOCUMENT_H_

#include <string>
#include <vector>

#include "server/http_api/http_routes.h"

namespace relserve {

// One route's OpenAPI 3 operation (method "POST", path "/embed"): its summary, request and
// response schemas, its error shape and TEI's x-compute-* headers, as JSON text; empty for a
// route not described (json_conversion_test requires every route to be). MakeHttpRoutes puts
// it in the route's `openapi`.
std::string OpenApiOperation(const std::string& method, const std::string& path);

// The OpenAPI 3 document of the HTTP/JSON API (GET /api-doc/openapi.json, where TEI serves its
// own): its `paths` generated from the route table, each route with its `openapi` operation,
// beside the schemas and headers they refer to.
std::string OpenApiDocument(const std::vector<HttpRoute>& routes);

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_API_OPENAPI_DOCUMENT_H_
