// The L3 prefetcher of R-KV3 at the level where it can help: chat sessions. A restore already
// reads a prompt's whole chain at admission, so there are no "adjacent pages" left to fetch
// early; what costs a follow-up turn its time is that read itself, when the session's pages
// went to L3 during the user's think time. LRU-K with K = 3: a session whose turns came K times
// is hot, the spacing of its last K turns predicts the next one, and the engine reads the last
// turn's pages back into free L2 pages `lead` before that (engine_kv.cpp), so the turn finds
// them in L2.
//
// The history is bounded: past `capacity` sessions, the one with the largest backward
// K-distance goes (fewer than K turns first, oldest last turn first; otherwise the oldest K-th
// most recent turn). Pure bookkeeping, no I/O; time is given by the caller. Not synchronised.
#pragma once

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <set>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace k25 {

class SessionPrefetcher {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr int kMaxK = 8;

  // A session's KV as its last turn left it: the chained keys of its full pages and their tokens.
  struct Chain {
    std::vector<uint64_t> keys;
    std::vector<int32_t> tokens;  // keys.size() pages of page_tokens each
  };

  // Throws k25::Error unless 2 <= k <= kMaxK (two turns at least, to measure a spacing) and
  // capacity >= 1.
  explicit SessionPrefetcher(int k = 3, size_t capacity = 4096);

  // A turn of `session`, submitted at `at`, finished leaving `chain` (may be empty: the turn
  // still counts).
  void record(uint64_t session, Clock::time_point at, Chain chain);
  // The hot sessions whose next turn is predicted at most `lead` after `now`, each once per
  // turn; not those whose predicted turn is more than one spacing past (the session went
  // quiet). The chains stay valid until the next record().
  std::vector<const Chain*> due(Clock::time_point now, Clock::duration lead);
  // When due() next has something, at the earliest; nullopt when no session is hot.
  std::optional<Clock::time_point> next_due(Clock::duration lead) const;

  int turns(uint64_t session) const;  // remembered, at most K
  size_t tracked() const { return sessions_.size(); }

 private:
  struct Session {
    std::array<Clock::time_point, kMaxK> times{};  // most recent first
    int n = 0;                                     // turns remembered, <= k_
    bool fetched = false;                          // due() returned it since its last turn
    Chain chain;
  };
  // The predicted time of the next turn (hot sessions only).
  std::optional<Clock::time_point> predicted(const Session& s) const;
  // Eviction order: the smallest tuple goes first.
  using Rank = std::tuple<int, Clock::time_point, uint64_t>;
  Rank rank(uint64_t session, const Session& s) const;

  int k_;
  size_t capacity_;
  std::unordered_map<uint64_t, Session> sessions_;
  std::set<Rank> order_;
};

}  // namespace k25
