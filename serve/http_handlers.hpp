#pragma once
// The REST endpoints of TF Serving (tensorflow_serving/g3doc/api_rest.md) on a cpp-httplib server:
//   GET  /v1/models/NAME[/versions/N]            model status (GetModelStatusResponse as JSON)
//   GET  /v1/models/NAME[/versions/N]/metadata   signature_def "serving_default"
//   POST /v1/models/NAME[/versions/N]:predict    row ("instances") or columnar ("inputs") format
//   GET  /monitoring/prometheus/metrics          metrics.hpp
// Errors answer {"error": "..."}: 400 for a malformed request, 404 for an unknown model or
// version, 413 for a body over --max_body_bytes, 500 for a failure inside the server.
namespace httplib { class Server; }

namespace keel::serve {

class ModelRegistry;
class Metrics;

void install_handlers(httplib::Server& server, ModelRegistry& registry, Metrics& metrics);

}  // namespace keel::serve
