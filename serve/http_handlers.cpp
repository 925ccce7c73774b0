// REST handlers (see http_handlers.hpp). Status codes follow TF Serving's mapping of its error
// codes (http_rest_api_util.cc ToHTTPStatusCode): INVALID_ARGUMENT 400, NOT_FOUND 404.
#include "http_handlers.hpp"

#include <httplib.h>
#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>

#include <fmt/core.h>

#include "metrics.hpp"
#include "model_registry.hpp"
#include "tensor_json.hpp"

namespace keel::serve {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

// An error with the HTTP status it answers.
struct HttpError {
  int status;
  std::string message;
};

void answer_json(httplib::Response& res, int status, const std::string& body) {
  res.status = status;
  res.set_content(body, "application/json");
}

void answer_error(httplib::Response& res, int status, const std::string& message) {
  answer_json(res, status, json{{"error", message}}.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::optional<std::int64_t> version_of(const httplib::Request& req) {
  if (req.matches.size() < 3 || !req.matches[2].matched) return std::nullopt;
  const std::string s = req.matches[2].str();
  if (s.size() > 18) throw HttpError{400, fmt::format("version '{}' is out of range", s)};
  return std::stoll(s);
}

ServedModel& model_of(ModelRegistry& registry, const std::string& name, std::optional<std::int64_t> version) {
  ServedModel* m = registry.find(name);
  if (!m) {
    if (version) throw HttpError{404, fmt::format("Could not find version {} of model {}", *version, name)};
    throw HttpError{404, fmt::format("Could not find any versions of model {}", name)};
  }
  return *m;
}

json status_json(const VersionStatus& s) {
  return {{"version", std::to_string(s.version)},
          {"state", s.state},
          {"status", {{"error_code", s.error_code}, {"error_message", s.error_message}}}};
}

std::string model_status(ModelRegistry& registry, const std::string& name, std::optional<std::int64_t> version) {
  ServedModel& m = model_of(registry, name, version);
  json list = json::array();
  for (const auto& s : m.statuses())
    if (!version || s.version == *version) list.push_back(status_json(s));
  if (list.empty()) {
    if (version) throw HttpError{404, fmt::format("Could not find version {} of model {}", *version, name)};
    throw HttpError{404, fmt::format("Could not find any versions of model {}", name)};
  }
  return json{{"model_version_status", list}}.dump(1);
}

std::shared_ptr<LoadedVersion> servable(ModelRegistry& registry, const std::string& name,
                                        std::optional<std::int64_t> version) {
  ServedModel* m = registry.find(name);
  std::shared_ptr<LoadedVersion> v = m ? m->get(version) : nullptr;
  if (!v)
    throw HttpError{404, version ? fmt::format("Servable not found for request: Specific({}, {})", name, *version)
                                 : fmt::format("Servable not found for request: Latest({})", name)};
  return v;
}

std::string model_metadata(ModelRegistry& registry, const std::string& name, std::optional<std::int64_t> version) {
  auto v = servable(registry, name, version);
  json out = {{"model_spec", {{"name", name}, {"signature_name", ""}, {"version", std::to_string(v->version())}}},
              {"metadata", {{"signature_def", {{"signature_def", {{"serving_default", signature_def_json(v->signature())}}}}}}}};
  return out.dump(1);
}

std::string predict(ModelRegistry& registry, const std::string& name, std::optional<std::int64_t> version,
                    const std::string& body) {
  json request;
  try {
    request = json::parse(body);
  } catch (const json::parse_error& e) {
    throw HttpError{400, fmt::format("JSON Parse error: {}", e.what())};
  }
  auto v = servable(registry, name, version);
  PredictRequest r;
  try {
    r = parse_predict_request(request, v->signature());
  } catch (const Error& e) {
    throw HttpError{400, e.what()};
  }
  std::vector<Tensor> outputs;
  try {
    outputs = v->predict(r.inputs);
  } catch (const Error& e) {  // the model refused the inputs (shapes, dtypes)
    throw HttpError{400, e.what()};
  }
  return predict_response_json(outputs, v->signature(), r.columnar);
}

// Runs `body`, answers its result or its error, and counts the request under `endpoint`.
template <class F>
void respond(Metrics& metrics, const char* endpoint, httplib::Response& res, Clock::time_point start, F body) {
  try {
    answer_json(res, 200, body());
  } catch (const HttpError& e) {
    answer_error(res, e.status, e.message);
  } catch (const Error& e) {
    answer_error(res, 400, e.what());
  } catch (const json::exception& e) {  // a JSON value of an unexpected type
    answer_error(res, 400, e.what());
  } catch (const std::bad_alloc&) {
    answer_error(res, 500, "out of memory while answering the request");
  } catch (const std::exception& e) {
    answer_error(res, 500, e.what());
  }
  metrics.record_request(endpoint, res.status, std::chrono::duration<double>(Clock::now() - start).count());
}

template <class F>
httplib::Server::Handler handler(Metrics& metrics, const char* endpoint, F body) {
  return [&metrics, endpoint, body](const httplib::Request& req, httplib::Response& res) {
    respond(metrics, endpoint, res, Clock::now(), [&] { return body(req); });
  };
}

// POST handlers read the body themselves: httplib refuses form-encoded bodies (curl -d's and
// urllib's default Content-Type) over 8 KiB before routing, whatever --max_body_bytes says; a
// content reader takes any Content-Type up to the configured limit (413 beyond it).
template <class F>
httplib::Server::HandlerWithContentReader post_handler(Metrics& metrics, const char* endpoint, F body) {
  return [&metrics, endpoint, body](const httplib::Request& req, httplib::Response& res,
                                    const httplib::ContentReader& reader) {
    const auto start = Clock::now();
    std::string content;
    const bool read = reader([&](const char* data, std::size_t n) {
      content.append(data, n);
      return true;
    });
    respond(metrics, endpoint, res, start, [&]() -> std::string {
      if (!read) {
        if (res.status == 413) throw HttpError{413, "Request body too large (--max_body_bytes)"};
        throw HttpError{400, "the request body could not be read (a timeout or a broken connection)"};
      }
      return body(req, content);
    });
  };
}

}  // namespace

void install_handlers(httplib::Server& server, ModelRegistry& registry, Metrics& metrics) {
  // NAME: anything but '/' and ':'; N: decimal digits (std::regex, ECMAScript).
  const std::string model = R"(/v1/models/([^/:]+)(?:/versions/([0-9]+))?)";
  server.Get(model, handler(metrics, "status", [&](const httplib::Request& req) {
               return model_status(registry, req.matches[1].str(), version_of(req));
             }));
  server.Get(model + "/metadata", handler(metrics, "metadata", [&](const httplib::Request& req) {
               return model_metadata(registry, req.matches[1].str(), version_of(req));
             }));
  server.Post(model + ":predict", post_handler(metrics, "predict", [&](const httplib::Request& req, const std::string& body) {
                return predict(registry, req.matches[1].str(), version_of(req), body);
              }));
  server.Get("/monitoring/prometheus/metrics", [&](const httplib::Request&, httplib::Response& res) {
    res.set_content(metrics.render(), "text/plain; version=0.0.4");
    metrics.record_request("metrics", 200, 0);
  });
  // Any other path under /v1/: TF Serving's "Malformed request" (400).
  const auto malformed = handler(metrics, "other", [](const httplib::Request& req) -> std::string {
    throw HttpError{400, fmt::format("Malformed request: {} {}", req.method, req.path)};
  });
  server.Get("/v1/.*", malformed);
  server.Post("/v1/.*", post_handler(metrics, "other", [](const httplib::Request& req, const std::string&) -> std::string {
                throw HttpError{400, fmt::format("Malformed request: {} {}", req.method, req.path)};
              }));
  // Errors httplib answers itself (no route: 404, body over the limit: 413, ...) get the error
  // JSON too.
  server.set_error_handler([&metrics](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string message = res.status == 413   ? "Request body too large (--max_body_bytes)"
                          : res.status == 404 ? fmt::format("Not found: {} {}", req.method, req.path)
                                              : fmt::format("HTTP error {}", res.status);
    answer_error(res, res.status, message);
    metrics.record_request("other", res.status, 0);
  });
  server.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr e) {
    std::string message = "internal error";
    try {
      if (e) std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      message = ex.what();
    } catch (...) {
    }
    answer_error(res, 500, message);
  });
}

}  // namespace keel::serve
