// One streaming POST (client::HttpCall: a fresh connection each time) with the response's SSE
// events timed as they arrive. Runs as a coroutine on the caller's io_context, so many streams can
// be in flight on one thread.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "client/http_call.h"

namespace k25::loadgen {

using client::HttpUrl;
using tcp = net::ip::tcp;

struct StreamRequest {
  std::string target;  // e.g. /v1/completions (HttpUrl::target adds the URL's prefix)
  std::string body;    // JSON
  std::vector<std::pair<std::string, std::string>> headers;
  std::chrono::milliseconds timeout{600'000};  // whole exchange
};

struct StreamResult {
  int status = 0;  // 0: no HTTP response
  std::optional<int> retry_after_s;
  bool done = false;             // "[DONE]" received
  std::string error;             // empty on success
  std::vector<double> chunk_ms;  // arrival of each non-empty text chunk, ms after the send
  std::string text;              // the generated text
  std::optional<int> prompt_tokens, completion_tokens;  // usage, when sent
  double end_ms = 0;                                    // end of the exchange, ms after the send
};

// The streams in flight, so that a bounded run can cut them off.
class ActiveStreams {
 public:
  void add(client::HttpCall* call) { calls_.insert(call); }
  void remove(client::HttpCall* call) { calls_.erase(call); }
  void close_all();
  size_t size() const { return calls_.size(); }

 private:
  std::set<client::HttpCall*> calls_;
};

net::awaitable<StreamResult> stream_post(const std::vector<tcp::endpoint>& endpoints,
                                         const HttpUrl& url, const StreamRequest& request,
                                         ActiveStreams& active);

}  // namespace k25::loadgen
