#include "verify/openai_client.h"

#include "client/http_call.h"
#include "core/error.h"

namespace k25::verify {

using nlohmann::json;

OpenAiClient::OpenAiClient(const std::string& base_url, std::string api_key,
                           std::chrono::seconds timeout)
    : base_url_(base_url),
      url_(client::HttpUrl::parse(base_url, "server URL")),
      api_key_(std::move(api_key)),
      timeout_(timeout) {}

json OpenAiClient::post(const std::string& route, const json& body) const {
  return call("POST", route, body.dump());
}

json OpenAiClient::get(const std::string& route) const {
  return call("GET", route, "");
}

json OpenAiClient::call(const std::string& method, const std::string& route,
                        const std::string& body) const {
  client::ClientRequest request{http::string_to_verb(method), route, body, {}};
  request.headers.emplace_back("user-agent", "k25-verify");
  if (!api_key_.empty()) request.headers.emplace_back("authorization", "Bearer " + api_key_);
  if (!body.empty()) request.headers.emplace_back("content-type", "application/json");
  const client::ClientResponse res = client::fetch(url_, request, {timeout_, {}});
  const std::string where = concat(method, " ", base_url_, route);
  json answer = json::parse(res.body, nullptr, false);
  if (res.status / 100 != 2) {
    std::string message = res.body.substr(0, 300);
    if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
      message = answer["error"].value("message", message);
    }
    fail(where, ": HTTP ", res.status, ": ", message);
  }
  if (answer.is_discarded()) fail(where, ": the answer is not JSON");
  return answer;
}

}  // namespace k25::verify
