#include "verify/openai_client.h"

#include "core/error.h"

namespace k25::verify {

using nlohmann::json;

OpenAiClient::OpenAiClient(const std::string& base_url, std::string api_key,
                           std::chrono::seconds timeout)
    : base_url_(base_url),
      url_(parse_upstream_url(base_url, "server URL")),
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
  const std::string where = concat(method, " ", base_url_, route);
  net::io_context ioc;
  beast::tcp_stream stream(ioc);
  http::response<http::string_body> res;
  try {
    net::ip::tcp::resolver resolver(ioc);
    stream.expires_after(timeout_);
    stream.connect(resolver.resolve(url_.host, url_.port));
    http::request<http::string_body> req{http::string_to_verb(method), upstream_target(url_, route),
                                         11};
    req.set(http::field::host, url_.host + ":" + url_.port);
    req.set(http::field::user_agent, "k25-verify");
    if (!api_key_.empty()) req.set(http::field::authorization, "Bearer " + api_key_);
    if (!body.empty()) req.set(http::field::content_type, "application/json");
    req.body() = body;
    req.prepare_payload();
    stream.expires_after(timeout_);
    http::write(stream, req);
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(1 << 28);
    stream.expires_after(timeout_);
    http::read(stream, buffer, parser);
    res = parser.release();
  } catch (const boost::system::system_error& e) {
    fail(where, ": ", e.code().message());
  }
  beast::error_code ec;
  stream.socket().shutdown(net::ip::tcp::socket::shutdown_both, ec);
  json answer = json::parse(res.body(), nullptr, false);
  if (res.result_int() / 100 != 2) {
    std::string message = res.body().substr(0, 300);
    if (answer.is_object() && answer.contains("error") && answer["error"].is_object()) {
      message = answer["error"].value("message", message);
    }
    fail(where, ": HTTP ", res.result_int(), ": ", message);
  }
  if (answer.is_discarded()) fail(where, ": the answer is not JSON");
  return answer;
}

}  // namespace k25::verify
