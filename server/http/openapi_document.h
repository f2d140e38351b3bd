#ifndef RELSERVE_SERVER_HTTP_OPENAPI_DOCUMENT_H_
#define RELSERVE_SERVER_HTTP_OPENAPI_DOCUMENT_H_

namespace relserve {

// The OpenAPI 3 document of the HTTP/JSON API (GET /api-doc/openapi.json, where TEI serves its
// own): every route of http_routes.h with its request and response schemas, its error shape
// and TEI's x-compute-* headers. Written by hand (openapi_document.cc); json_conversion_test
// checks that it is JSON and lists every route MakeHttpRoutes makes, no more.
const char* OpenApiDocument();

}  // namespace relserve

#endif  // RELSERVE_SERVER_HTTP_OPENAPI_DOCUMENT_H_
