#include "model/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>

#include "core/clock.h"
#include "core/error.h"
#include "model/grammar_sampling.h"

namespace k25 {

double GenerateResult::prefill_tokens_per_second() const {
  return prefill_ms > 0 ? 1000.0 * prefill_tokens / prefill_ms : 0;
}

double GenerateResult::decode_tokens_per_second() const {
  const size_t decoded = tokens.size() > 1 ? tokens.size() - 1 : 0;
  return decode_ms > 0 ? 1000.0 * decoded / decode_ms : 0;
}

GenerateResult generate(Model& model, ThreadPool& pool, const std::vector<TokenId>& prompt,
                        const GenerateOptions& options,
                        const std::function<void(const std::string&)>& on_text) {
  const ModelConfig& c = model.config();
  const Tokenizer& tok = model.tokenizer();
  if (prompt.empty()) fail("generate: the prompt has no tokens");
  if (prompt.size() + std::max(options.n_predict, 0) > static_cast<size_t>(c.context_length)) {
    fail("generate: prompt (", prompt.size(), " tokens) plus ", options.n_predict,
         " new tokens exceeds the context of ", c.context_length);
  }
  auto kv = model.make_kv_cache(options.kv_dtype);
  Sampler sampler(options.sampling, c.n_vocab);
  std::optional<GrammarMatcher> grammar;
  if (options.grammar) {
    auto vocabulary = std::make_shared<const GrammarVocabulary>(tok);
    grammar.emplace(options.grammar, vocabulary,
                    options.ignore_eos ? std::vector<TokenId>{} : vocabulary->end_of_generation());
  }
  Utf8StreamDecoder utf8;
  StopMatcher stops(options.stop);
  std::vector<float> logits(c.n_vocab);
  std::vector<TokenId> history = prompt;
  GenerateResult result;
  result.prefill_tokens = static_cast<int>(prompt.size());

  auto start = std::chrono::steady_clock::now();
  const size_t chunk = std::max(options.prefill_chunk, 1);
  for (size_t begin = 0; begin < prompt.size(); begin += chunk) {
    const size_t end = std::min(prompt.size(), begin + chunk);
    std::vector<BatchToken> batch;
    for (size_t i = begin; i < end; ++i) {
      batch.push_back({prompt[i], static_cast<int>(i), 0, i + 1 == prompt.size()});
    }
    model.forward(batch, *kv, logits.data(), pool);
  }
  result.prefill_ms = ms_since(start);
  start = std::chrono::steady_clock::now();

  auto emit = [&](const std::string& text) {
    result.text += text;
    if (on_text && !text.empty()) on_text(text);
  };
  result.finish_reason = "length";
  bool hit_stop_string = false;
  for (int i = 0; i < options.n_predict; ++i) {
    if (i > 0) {
      const BatchToken next{history.back(), static_cast<int>(history.size()) - 1, 0, true};
      model.forward({next}, *kv, logits.data(), pool);
    }
    const TokenId token = grammar ? sample_constrained(sampler, *grammar, logits.data(), c.n_vocab,
                                                       history, options.n_predict - i - 1)
                                  : sampler.sample(logits.data(), history);
    history.push_back(token);
    result.tokens.push_back(token);
    if (!options.ignore_eos && tok.is_end_of_generation(token)) {
      result.finish_reason = "stop";
      break;
    }
    StopMatcher::Result r = stops.push(utf8.push(tok.token_to_piece(token)));
    emit(r.emit);
    if (r.stopped) {
      result.finish_reason = "stop";
      hit_stop_string = true;
      break;
    }
    if (grammar && grammar->is_complete()) {
      result.finish_reason = "stop";
      break;
    }
  }
  if (!hit_stop_string) {
    StopMatcher::Result r = stops.push(utf8.flush());
    emit(r.emit);
    if (r.stopped) {
      result.finish_reason = "stop";
    } else {
      emit(stops.flush());
    }
  }
  result.decode_ms = ms_since(start);
  return result;
}

}  // namespace k25
