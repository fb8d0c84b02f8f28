#pragma once
// An error a client caused (or is told about), with its HTTP status and the OpenAI error body.
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

namespace slab::server {

struct ApiError : std::runtime_error {
  int status;
  std::string param;  // the request field at fault, empty when none
  ApiError(int http_status, const std::string& message, std::string field = {})
      : std::runtime_error(message), status(http_status), param(std::move(field)) {}
};

// {"error": {"message", "type", "param", "code"}} as OpenAI and vLLM send it.
inline nlohmann::json error_body(int status, const std::string& message, const std::string& param = {}) {
  // OpenAI's types: every client error is an invalid request except the two with their own.
  const char* type = status == 401   ? "authentication_error"
                     : status == 404 ? "not_found_error"
                     : status == 503 ? "service_unavailable"
                     : status < 500  ? "invalid_request_error"
                                     : "server_error";
  nlohmann::json error = {{"message", message}, {"type", type}, {"code", status}};
  error["param"] = param.empty() ? nlohmann::json(nullptr) : nlohmann::json(param);
  return {{"error", error}};
}

}  // namespace slab::server
