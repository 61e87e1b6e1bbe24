// k25-verify's view of an OpenAI-compatible server: POST/GET JSON to base URL + route through
// client::fetch (one connection per call), errors turned into k25::Error with the server's message.
#pragma once

#include <chrono>
#include <nlohmann/json.hpp>
#include <string>

#include "client/http_url.h"

namespace k25::verify {

class OpenAiClient {
 public:
  // `base_url`: http://host:port or http://host:port/v1; `api_key` empty: no Authorization.
  OpenAiClient(const std::string& base_url, std::string api_key, std::chrono::seconds timeout);

  // POST `route` ("/v1/completions") with a JSON body; the JSON answer. Throws k25::Error on
  // network failures, non-2xx statuses (with the server's message) and non-JSON bodies.
  nlohmann::json post(const std::string& route, const nlohmann::json& body) const;
  nlohmann::json get(const std::string& route) const;
  const std::string& base_url() const { return base_url_; }

 private:
  nlohmann::json call(const std::string& method, const std::string& route,
                      const std::string& body) const;

  std::string base_url_;
  client::HttpUrl url_;
  std::string api_key_;
  std::chrono::seconds timeout_;
};

}  // namespace k25::verify
