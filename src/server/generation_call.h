// One generation request on its way through Api::generation (api_generation.cpp): what was
// parsed and planned, the engine requests of its choices, and whether the client is still there.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "server/engine_client.h"
#include "server/event_channel.h"
#include "server/flash_headers.h"
#include "server/http_server.h"
#include "server/request_log.h"
#include "server/request_parsing.h"

namespace k25 {

struct GenerationCall {
  GenerationCall(HttpExchange& ex_, ApiFlavor flavor_, RequestLog& log_, EngineClient& engine_)
      : ex(ex_), flavor(flavor_), log(log_), engine(engine_) {}

  HttpExchange& ex;
  ApiFlavor flavor;
  RequestLog& log;
  EngineClient& engine;

  // Api::prepare_generation
  FlashHints hints;
  ParsedRequest parsed;
  bool chat = false;  // Chat or Messages: the prompt is a rendered conversation
  EngineRequest request;
  int n_prompt = 0;
  // Api::submit_choices: one engine request per choice (OpenAI's n), events into `channel`;
  // what the engine said about the first (Flash's decision is the same for every choice).
  Admission admission;
  std::shared_ptr<EventChannel> channel;
  std::vector<RequestId> ids;
  bool client_gone = false;

  void cancel_all() {
    for (RequestId id : ids) engine.cancel(id);
  }
  // Positions the engine has computed for the choices so far.
  int64_t progress() const {
    int64_t sum = 0;
    for (RequestId id : ids) sum += engine.progress(id);
    return sum;
  }
  // The client went away: its choices are cancelled, the connection closes after this request.
  void client_left() {
    if (!client_gone) cancel_all();
    client_gone = true;
    ex.close_after();
  }
  // Looks at the client at most every `interval`, whether events flow or not.
  void check_client(std::chrono::milliseconds interval) {
    const auto now = std::chrono::steady_clock::now();
    if (client_gone || now < next_client_check) return;
    next_client_check = now + interval;
    if (ex.peer_closed()) client_left();
  }

 private:
  std::chrono::steady_clock::time_point next_client_check;
};

}  // namespace k25
