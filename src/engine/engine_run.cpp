// Engine: running a step's tasks. One forward call for all of them, whatever their compute plans
// (embeddings, which need hidden states, in a call of their own), then per sequence:
// sampling (plain, constrained, or verifying drafts), stop checks, events to the request's
// callback, and the end of finished requests.
#include <algorithm>
#include <iostream>

#include "core/clock.h"
#include "core/error.h"
#include "engine/engine_sequence.h"
#include "model/grammar_sampling.h"

namespace k25 {

void Engine::run_tasks(const ScheduledStep& s) {
  const std::vector<TaskDescriptor>& tasks = s.decision.tasks;
  plan_drafts(s.decision, s.live);
  const Clock::time_point step_start = Clock::now();
  int n_tokens = 0, n_sequences = 0;
  double positions = 0;  // the sum of the tokens' context positions (attention's share)
  // Tokens of different compute plans share one forward call (issue 16): each block runs over the
  // tokens whose plan keeps it, so a batch of N plans reads each weight once, not N times.
  // Embedding requests want hidden states, which only the whole model gives: when a step has
  // some, the tokens with a plan run in a second call.
  std::vector<std::pair<Sequence*, TaskDescriptor>> whole, planned;
  bool embeddings = false;
  for (const TaskDescriptor& t : tasks) {
    Sequence* seq = s.live[t.seq];
    embeddings = embeddings || seq->pooler.has_value();
    (seq->plan() ? planned : whole).push_back({seq, t});
    n_tokens += t.length;
    positions += context_positions(t.start, t.length);
    ++n_sequences;
  }
  if (embeddings) {
    run_group(whole);
    run_group(planned);
  } else {
    whole.insert(whole.end(), planned.begin(), planned.end());
    run_group(whole);
  }
  const double step_ms = ms_between(step_start, Clock::now());
  stats_.step_seconds.observe(step_ms / 1000.0);
  if (calibrator_) recalibrate(n_tokens, positions, step_ms);
  stats_.batch_sequences.observe(n_sequences);
  stats_.batch_tokens.observe(n_tokens);
}

void Engine::recalibrate(int n_tokens, double positions, double step_ms) {
  calibrator_->observe(n_tokens, positions, step_ms);
  apply_calibration();
}

void Engine::apply_calibration() {
  const std::optional<StepCalibration> c = calibrator_->calibration();
  if (!c) return;
  scheduler_.set_step_cost(c->step_token_budget, c->position_cost);
  stats_.step_token_budget = c->step_token_budget;
  stats_.step_position_cost = c->position_cost;
}

void Engine::run_group(const std::vector<std::pair<Sequence*, TaskDescriptor>>& group) {
  std::vector<BatchToken> batch;
  std::vector<const ComputePlan*> plans;  // per token
  bool any_plan = false;
  std::vector<std::pair<Sequence*, int>> in_batch;        // sequence, tokens it has in the batch
  std::vector<Sequence*> wanting_logits;                  // in batch order
  std::vector<std::pair<Sequence*, int>> wanting_hidden;  // sequence, position; in batch order
  for (const auto& [seq, task] : group) {
    if (seq->finished) continue;
    try {
      fault_.at_request(seq->id, seq->n_generated);
      kv_->reserve(seq->kv_id, task.start + task.length);
    } catch (const Error& e) {
      finish(*seq, FinishReason::Error, e.what());
      continue;
    } catch (const std::exception& e) {
      fail_after_exception(*seq, e.what());  // e.g. out of memory growing its page table
      continue;
    }
    for (int j = 0; j < task.length; ++j) {
      const int pos = task.start + j;
      const int n_tokens = static_cast<int>(seq->tokens.size());
      BatchToken token{seq->tokens[pos], pos, seq->kv_id, pos + 1 == n_tokens && !seq->pooler};
      token.want_hidden = seq->pooler && seq->pooler->wants(pos, n_tokens);
      batch.push_back(token);
      if (token.want_logits) wanting_logits.push_back(seq);
      if (token.want_hidden) wanting_hidden.push_back({seq, pos});
    }
    if (!seq->plan()) add_draft(*seq, task, batch, wanting_logits);
    plans.resize(batch.size(), seq->plan());
    any_plan = any_plan || seq->plan() != nullptr;
    in_batch.push_back({seq, task.length});
  }
  if (batch.empty()) return;

  const int n_vocab = model_.config().n_vocab;
  logits_.resize(wanting_logits.size() * static_cast<size_t>(n_vocab));
  if (options_.debug_step_delay_ms > 0) {
    std::this_thread::sleep_for(std::chrono::milliseconds(options_.debug_step_delay_ms));
  }
  try {
    if (!wanting_hidden.empty()) {
      // Embedding requests run without a plan, so they are only in the plan-less group.
      hidden_.resize(wanting_hidden.size() * static_cast<size_t>(model_.config().dim));
      model_.forward_hidden(batch, forward_cache(), logits_.data(), hidden_.data(), *pool_);
    } else if (any_plan) {
      model_.forward_mixed(batch, forward_cache(), logits_.data(), *pool_, plans);
    } else {
      model_.forward(batch, forward_cache(), logits_.data(), *pool_);
    }
  } catch (const std::exception& e) {
    for (auto& [seq, n] : in_batch) finish(*seq, FinishReason::Error, e.what());
    return;
  }
  ++stats_.forward_calls;
  const Clock::time_point served = Clock::now();
  for (auto& [seq, n] : in_batch) {
    seq->last_served = served;
    if (n > 1) seq->last_prefill_step = n_steps_;
    count_computed(*seq, n, !seq->plan());
  }
  const size_t dim = model_.config().dim;
  for (size_t row = 0; row < wanting_hidden.size(); ++row) {
    auto [seq, pos] = wanting_hidden[row];
    seq->pooler->add(pos, static_cast<int>(seq->tokens.size()), hidden_.data() + row * dim);
  }
  for (auto& [seq, n] : in_batch) {
    if (seq->pooler && seq->n_computed == static_cast<int>(seq->tokens.size())) {
      finish(*seq, FinishReason::Stop);
    }
  }
  for (size_t row = 0; row < wanting_logits.size(); ++row) {
    Sequence& seq = *wanting_logits[row];
    const size_t first_row = row;
    row += seq.draft.size();  // the draft's rows follow the sequence's first one
    try {
      sample_rows(seq, logits_.data() + first_row * static_cast<size_t>(n_vocab));
    } catch (const std::exception& e) {
      // E.g. the sampler refusing NaN logits: this request fails, the engine goes on.
      finish(seq, FinishReason::Error, e.what());
      continue;
    }
    if (seq.request.adaptive_pruning && !seq.finished && pruner_.due(seq.n_generated)) {
      const ComputePlan base =
          seq.request.plan ? *seq.request.plan
                           : ComputePlan::full(model_.config().n_layers, model_.config().n_heads);
      seq.current_plan = pruner_.update(*kv_, seq.kv_id, seq.n_computed, base,
                                        seq.request.max_compute_saved, seq.adaptive);
      ++stats_.adaptive_updates;
    }
  }
}

void Engine::plan_drafts(const StepDecision& decision, const std::vector<Sequence*>& live) {
  // Drafts take only free pages that none of the step's tasks needs (never cached ones), so
  // drafting never fails a task's reserve nor evicts the prefix cache.
  long needed = 0;
  int n_decoding = 0;
  for (const TaskDescriptor& t : decision.tasks) {
    const Sequence& seq = *live[t.seq];
    n_decoding += t.length == 1 && t.start + 1 == static_cast<int>(seq.tokens.size()) ? 1 : 0;
    needed += std::max(0L, kv_->pages_missing(seq.kv_id, t.start + t.length));
  }
  drafting_ = n_decoding <= options_.speculation.max_batch;
  draft_pages_ = std::max(0L, static_cast<long>(kv_->pool().pages_free()) - needed);
}

void Engine::add_draft(Sequence& seq, const TaskDescriptor& task, std::vector<BatchToken>& batch,
                       std::vector<Sequence*>& wanting_logits) {
  seq.draft.clear();
  const int n_tokens = static_cast<int>(seq.tokens.size());
  if (!drafting_ || seq.request.speculative == SpeculativeMode::kOff ||
      seq.request.adaptive_pruning || seq.pooler || task.length != 1 ||
      task.start + 1 != n_tokens || !seq.draft_length.take_turn()) {
    return;
  }
  // Room for the tokens after this step's first one: max_tokens, and the context (the positions
  // computed end two before it: a sequence that fills it ends without computing its last token).
  const int page_tokens = options_.kv_page_tokens;
  const long in_pages =
      (static_cast<long>(kv_->page_table(seq.kv_id).size()) + draft_pages_) * page_tokens;
  const long k =
      std::min<long>({seq.draft_length.next(), seq.request.max_tokens - seq.n_generated - 1,
                      context_size_ - 1 - n_tokens, in_pages - n_tokens});
  if (k <= 0) return;
  std::vector<TokenId> draft = seq.draft_plan ? self_draft(seq, static_cast<int>(k))
                                              : drafter_->draft(seq.tokens, static_cast<int>(k));
  if (draft.size() > static_cast<size_t>(k)) draft.resize(static_cast<size_t>(k));
  if (draft.empty()) return;
  const int n_positions = n_tokens + static_cast<int>(draft.size());
  const long pages = kv_->pages_missing(seq.kv_id, n_positions);
  try {
    kv_->reserve(seq.kv_id, n_positions);
  } catch (const Error&) {
    return;  // not expected (the pages are free); the step decodes one token instead
  }
  draft_pages_ -= pages;
  for (size_t i = 0; i < draft.size(); ++i) {
    batch.push_back({draft[i], n_tokens + static_cast<int>(i), seq.kv_id, true});
    wanting_logits.push_back(&seq);
  }
  seq.drafted_tokens += static_cast<int>(draft.size());
  stats_.spec_drafted_tokens += draft.size();
  seq.draft = std::move(draft);
}

std::vector<TokenId> Engine::self_draft(Sequence& seq, int k) {
  // The last token's position and the drafts' but the last one: the step's forward call
  // computes them all again under the full model.
  const int start = static_cast<int>(seq.tokens.size()) - 1;
  const long pages = kv_->pages_missing(seq.kv_id, start + k);
  try {
    kv_->reserve(seq.kv_id, start + k);
  } catch (const Error&) {
    return {};  // not expected (the pages are free); the step decodes one token instead
  }
  draft_pages_ -= pages;
  const int n_vocab = model_.config().n_vocab;
  std::vector<float> logits(static_cast<size_t>(n_vocab));
  std::vector<TokenId> draft;
  TokenId token = seq.tokens.back();
  for (int i = 0; i < k; ++i) {
    model_.forward({{token, start + i, seq.kv_id, true}}, forward_cache(), logits.data(), *pool_,
                   seq.draft_plan.get());
    token = static_cast<TokenId>(std::max_element(logits.begin(), logits.end()) - logits.begin());
    draft.push_back(token);
    ++stats_.spec_draft_forward_calls;
  }
  return draft;
}

void Engine::sample_rows(Sequence& seq, float* logits) {
  const size_t n_vocab = static_cast<size_t>(model_.config().n_vocab);
  on_logits(seq, logits);
  if (seq.draft.empty()) return;
  size_t accepted = 0;
  while (accepted < seq.draft.size() && !seq.finished && seq.tokens.back() == seq.draft[accepted]) {
    // The draft token is the sequence's next token: its KV row is kept and its logits row gives
    // the token after it.
    ++accepted;
    ++seq.accepted_tokens;  // before on_logits, whose token may finish the request
    ++stats_.spec_accepted_tokens;
    count_computed(seq, 1, true);
    on_logits(seq, logits + accepted * n_vocab);
  }
  seq.draft_length.observe(static_cast<int>(seq.draft.size()), static_cast<int>(accepted));
  // The rejected rows' positions lie past n_computed, so the next steps overwrite them before
  // anything reads them; pages that hold only such positions go back to the pool now.
  kv_->truncate(seq.kv_id, seq.n_computed);
}

void Engine::count_computed(Sequence& seq, int n, bool full_model) {
  if (full_model && seq.full_model_computed == seq.n_computed) seq.full_model_computed += n;
  const int recomputed = std::min(seq.n_computed + n, seq.max_computed) - seq.n_computed;
  if (recomputed > 0) stats_.recomputed_tokens += recomputed;
  seq.n_computed += n;
  seq.max_computed = std::max(seq.max_computed, seq.n_computed);
  if (seq.request.progress) seq.request.progress->fetch_add(n, std::memory_order_relaxed);
}

void Engine::on_logits(Sequence& seq, float* logits) {
  const Tokenizer& tokenizer = model_.tokenizer();
  const int n_vocab = model_.config().n_vocab;
  GenerationEvent event;
  const auto sample = [&] {
    // Tokens that may follow this one before max_tokens or the context ends the output.
    const int64_t tokens_left =
        std::min<int64_t>(seq.request.max_tokens - seq.n_generated,
                          context_size_ - static_cast<int64_t>(seq.tokens.size())) -
        1;
    return seq.grammar ? sample_constrained(seq.sampler, *seq.grammar, logits, n_vocab, seq.tokens,
                                            tokens_left)
                       : seq.sampler.sample(logits, seq.tokens);
  };
  if (seq.request.top_logprobs >= 0) {
    // The sampler rewrites logits in place; logprobs are of the raw distribution.
    std::vector<float> raw(logits, logits + n_vocab);
    TokenId token = sample();
    event.logprobs = compute_logprobs(raw.data(), n_vocab, token, seq.request.top_logprobs);
    event.token = token;
  } else {
    event.token = sample();
  }
  const Clock::time_point now = Clock::now();
  if (!seq.has_first_token) {
    seq.has_first_token = true;
    seq.ttft_ms = ms_between(seq.submitted, now);
    stats_.ttft_seconds.observe(seq.ttft_ms / 1000.0);
  } else {
    stats_.inter_token_seconds.observe(ms_between(seq.last_token, now) / 1000.0);
  }
  seq.last_token = now;
  ++seq.n_generated;
  ++stats_.completion_tokens;
  seq.tokens.push_back(event.token);

  const auto& stop_tokens = seq.request.stop_tokens;
  if ((!seq.request.ignore_eos && tokenizer.is_end_of_generation(event.token)) ||
      std::find(stop_tokens.begin(), stop_tokens.end(), event.token) != stop_tokens.end()) {
    finish(seq, FinishReason::Stop);
    return;
  }
  StopMatcher::Result matched =
      seq.stop_matcher.push(seq.utf8.push(tokenizer.token_to_piece(event.token, false)));
  event.text = std::move(matched.emit);
  seq.on_event(event);
  if (matched.stopped) {
    // The text before the stop string went out with this token; nothing is held back any more.
    seq.stop_string_matched = true;
    seq.matched_stop = std::move(matched.stop);
    finish(seq, FinishReason::Stop);
    return;
  }
  if (seq.grammar && seq.grammar->is_complete()) {
    finish(seq, FinishReason::Stop);  // nothing may follow: the output is whole
    return;
  }
  if (seq.n_generated >= seq.request.max_tokens ||
      static_cast<int>(seq.tokens.size()) >= context_size_) {
    finish(seq, FinishReason::Length);
  }
}

void Engine::finish(Sequence& seq, FinishReason reason, std::string error) {
  if (seq.finished) return;
  seq.finished = true;
  GenerationEvent event;
  event.kind = GenerationEvent::Kind::Finished;
  if (!seq.stop_string_matched && reason != FinishReason::Error) {
    // Release what the UTF-8 decoder and the stop matcher still hold.
    StopMatcher::Result tail = seq.stop_matcher.push(seq.utf8.flush());
    event.text = std::move(tail.emit);
    if (!tail.stopped) event.text += seq.stop_matcher.flush();
  }
  event.finish_reason = reason;
  event.matched_stop = seq.matched_stop;
  event.error = std::move(error);
  event.queue_timeout = seq.queue_timeout;
  event.prompt_tokens = static_cast<int>(seq.request.prompt.size());
  event.cached_tokens = seq.cached_tokens;
  event.cached_tokens_disk = seq.restored_disk_tokens;
  event.cached_tokens_shared = seq.restored_shared_tokens;
  event.completion_tokens = seq.n_generated;
  event.ttft_ms = seq.ttft_ms;
  event.total_ms = ms_between(seq.submitted, Clock::now());
  event.adaptive_decisions = seq.adaptive.decisions;
  if (seq.plan() != nullptr) event.final_plan = seq.current_plan;
  event.drafted_tokens = seq.drafted_tokens;
  event.accepted_tokens = seq.accepted_tokens;
  if (seq.pooler && reason == FinishReason::Stop) event.embedding = seq.pooler->result();
  ++stats_.requests_finished[static_cast<int>(reason)];
  stats_.request_seconds.observe(event.total_ms / 1000.0);
  // The request is over either way: a consumer that cannot take its last event (out of
  // memory) must not take the engine, and the other requests, down with it.
  try {
    seq.on_event(event);
  } catch (const std::exception& e) {
    std::cerr << "error: request " << seq.id << " lost its last event: " << e.what() << "\n";
  }
}

void Engine::release_finished() {
  for (auto it = seqs_.begin(); it != seqs_.end();) {
    if ((*it)->finished) {
      try {
        if ((*it)->restore) end_l3_restore(**it);
        drop_kv(**it);
      } catch (const std::exception& e) {
        std::cerr << "error: request " << (*it)->id << ": caching its KV failed (" << e.what()
                  << "); released uncached\n";
        discard_kv(**it);
      }
      it = seqs_.erase(it);
    } else {
      ++it;
    }
  }
  try {
    publish_stats();
  } catch (const std::exception&) {
    // Out of memory for the scheduler's views: the next step publishes them.
  }
}

}  // namespace k25
