#include "kv/session_prefetcher.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

SessionPrefetcher::SessionPrefetcher(int k, size_t capacity) : k_(k), capacity_(capacity) {
  if (k < 2 || k > kMaxK) fail("session prefetcher: K = ", k, " is not in [2, ", kMaxK, "]");
  if (capacity == 0) fail("session prefetcher: history capacity must be positive");
}

SessionPrefetcher::Rank SessionPrefetcher::rank(uint64_t session, const Session& s) const {
  const bool hot = s.n >= k_;
  return {hot ? 1 : 0, hot ? s.times[k_ - 1] : s.times[0], session};
}

void SessionPrefetcher::record(uint64_t session, Clock::time_point at, Chain chain) {
  auto [it, inserted] = sessions_.try_emplace(session);
  Session& s = it->second;
  if (!inserted) order_.erase(rank(session, s));
  const int kept = std::min(s.n, k_ - 1);
  std::copy_backward(s.times.begin(), s.times.begin() + kept, s.times.begin() + kept + 1);
  s.times[0] = at;
  s.n = std::min(s.n + 1, k_);
  s.fetched = false;
  s.chain = std::move(chain);
  const Rank current = rank(session, s);
  order_.insert(current);
  while (sessions_.size() > capacity_) {
    // Never the session just recorded: with the history full of hot sessions, a new one could
    // otherwise never collect its K turns.
    auto victim = order_.begin();
    if (*victim == current) ++victim;
    sessions_.erase(std::get<2>(*victim));
    order_.erase(victim);
  }
}

std::optional<SessionPrefetcher::Clock::time_point> SessionPrefetcher::predicted(
    const Session& s) const {
  if (s.n < k_) return std::nullopt;
  // The mean spacing of the last K turns, after the last one.
  return s.times[0] + (s.times[0] - s.times[k_ - 1]) / (k_ - 1);
}

std::vector<const SessionPrefetcher::Chain*> SessionPrefetcher::due(Clock::time_point now,
                                                                    Clock::duration lead) {
  std::vector<const Chain*> out;
  for (auto& [id, s] : sessions_) {
    const std::optional<Clock::time_point> next = predicted(s);
    if (!next || s.fetched || s.chain.keys.empty() || now < *next - lead) continue;
    s.fetched = true;  // once per turn, also when it is too late
    const Clock::duration spacing = *next - s.times[0];
    if (now <= *next + spacing) out.push_back(&s.chain);
  }
  return out;
}

std::optional<SessionPrefetcher::Clock::time_point> SessionPrefetcher::next_due(
    Clock::duration lead) const {
  std::optional<Clock::time_point> first;
  for (const auto& [id, s] : sessions_) {
    const std::optional<Clock::time_point> next = predicted(s);
    if (!next || s.fetched || s.chain.keys.empty()) continue;
    if (!first || *next - lead < *first) first = *next - lead;
  }
  return first;
}

int SessionPrefetcher::turns(uint64_t session) const {
  auto it = sessions_.find(session);
  return it == sessions_.end() ? 0 : it->second.n;
}

}  // namespace k25
