#include "model/grammar_matcher.h"

#include <algorithm>

#include "core/error.h"

namespace k25 {

namespace {
// More parse stacks than this at once means a wildly ambiguous grammar: refuse it rather than
// slow the engine down for every request.
constexpr size_t kMaxHeads = 4096;
constexpr size_t kMaxCachedMasks = 64;
// The memo of states (1 KiB of transitions each) starts again at this many: several times what
// a JSON schema request over a 150k-token vocabulary visits (under a thousand), few enough to
// hold for every request at once.
constexpr size_t kMaxStates = 4096;

// Shortest completions are counted up to this many bytes (far beyond any token budget).
constexpr uint64_t kFarBytes = uint64_t{1} << 30;

void sort_unique(std::vector<uint32_t>& v) {
  if (v.size() < 2) return;
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
}

// The fewest bytes each rule derives (a fixpoint, like the compiler's productivity check), then
// per element the fewest bytes from it to the end of its alternative.
std::vector<uint32_t> min_bytes_from(const Grammar& g) {
  const auto element_bytes = [&](const GrammarElement& e, const std::vector<uint64_t>& rule_min) {
    return e.kind == GrammarElement::Kind::Bytes ? uint64_t{1} : rule_min[e.index];
  };
  std::vector<uint64_t> rule_min(g.rules.size(), kFarBytes);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      for (uint32_t p : g.rules[r].alternatives) {
        uint64_t sum = 0;
        for (; g.elements[p].kind != GrammarElement::Kind::End; ++p)
          sum = std::min(kFarBytes, sum + element_bytes(g.elements[p], rule_min));
        if (sum < rule_min[r]) rule_min[r] = sum, changed = true;
      }
    }
  }
  std::vector<uint32_t> out(g.elements.size(), 0);
  for (const Grammar::Rule& rule : g.rules) {
    for (uint32_t start : rule.alternatives) {
      uint32_t end = start;
      while (g.elements[end].kind != GrammarElement::Kind::End) ++end;
      for (uint32_t p = end; p-- > start;) {
        out[p] = static_cast<uint32_t>(
            std::min(kFarBytes, out[p + 1] + element_bytes(g.elements[p], rule_min)));
      }
    }
  }
  return out;
}
}  // namespace

GrammarMatcher::GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                               std::shared_ptr<const GrammarVocabulary> vocabulary,
                               std::vector<TokenId> end_tokens)
    : grammar_(std::move(grammar)),
      vocabulary_(std::move(vocabulary)),
      end_tokens_(std::move(end_tokens)),
      min_bytes_from_(min_bytes_from(*grammar_)) {
  nodes_.push_back({});  // kRoot
  nodes_[kRoot].completion_bytes = 0;
  std::sort(end_tokens_.begin(), end_tokens_.end());
  for (TokenId t : end_tokens_)
    if (t >= 0 && t < vocabulary_->n_vocab() && !vocabulary_->piece(t).empty())
      end_tokens_in_trie_ = true;
  std::vector<uint32_t> heads;
  for (uint32_t start : grammar_->rules[grammar_->root].alternatives) closure(start, kRoot, heads);
  sort_unique(heads);
  state_ = intern_state(heads);
  levels_.resize(vocabulary_->max_depth() + 1);
}

size_t GrammarMatcher::HeadsHash::operator()(const std::vector<uint32_t>& heads) const {
  uint64_t h = heads.size();
  for (uint32_t head : heads) h = (h ^ head) * 0x100000001B3ull;
  return static_cast<size_t>(h ^ (h >> 32));
}

uint32_t GrammarMatcher::intern_state(std::vector<uint32_t>& heads) {
  if (auto it = state_index_.find(heads); it != state_index_.end()) return it->second;
  const auto id = static_cast<uint32_t>(states_.size());
  state_index_.emplace(heads, id);
  states_.push_back({std::move(heads)});
  transitions_.resize(transitions_.size() + 256, kUnknown);
  return id;
}

uint32_t GrammarMatcher::add_transition(uint32_t state, uint8_t byte) {
  advance(states_[state].heads, byte, next_heads_);
  const uint32_t next = next_heads_.empty() ? kDead : intern_state(next_heads_);
  // Indexed again: interning grows transitions_.
  transitions_[static_cast<size_t>(state) * 256 + byte] = next;
  return next;
}

void GrammarMatcher::restart_states(std::span<uint32_t> held) {
  std::vector<std::vector<uint32_t>> kept{states_[state_].heads};
  for (uint32_t id : held) kept.push_back(states_[id].heads);
  states_.clear();
  state_index_.clear();
  transitions_.clear();
  mask_cache_.clear();
  state_ = intern_state(kept[0]);
  for (size_t i = 0; i < held.size(); ++i) held[i] = intern_state(kept[i + 1]);
}

uint32_t GrammarMatcher::intern(uint32_t pos, uint32_t parent) {
  const uint64_t key = (static_cast<uint64_t>(pos) << 32) | parent;
  auto [it, added] = node_index_.emplace(key, static_cast<uint32_t>(nodes_.size()));
  if (added) nodes_.push_back({pos, parent});
  return it->second;
}

void GrammarMatcher::closure(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out) {
  const std::vector<GrammarElement>& elements = grammar_->elements;
  work_.clear();
  visited_.clear();
  work_.emplace_back(pos, parent);
  while (!work_.empty()) {
    const auto [p, up] = work_.back();
    work_.pop_back();
    if (!visited_.insert((static_cast<uint64_t>(p) << 32) | up).second) continue;
    const GrammarElement& e = elements[p];
    switch (e.kind) {
      case GrammarElement::Kind::End:
        if (up == kRoot) {
          out.push_back(kAccept);
        } else {
          work_.emplace_back(nodes_[up].pos, nodes_[up].parent);
        }
        break;
      case GrammarElement::Kind::Bytes:
        out.push_back(intern(p, up));
        break;
      case GrammarElement::Kind::Rule: {
        // A call in tail position returns straight to our parent: repetitions written as right
        // recursion (x* becomes r ::= x r | "") run in constant stack depth.
        const uint32_t resume =
            elements[p + 1].kind == GrammarElement::Kind::End ? up : intern(p + 1, up);
        for (uint32_t start : grammar_->rules[e.index].alternatives)
          work_.emplace_back(start, resume);
        break;
      }
    }
  }
}

std::pair<uint32_t, uint32_t> GrammarMatcher::successors(uint32_t node) {
  if (nodes_[node].successors_begin == kNotComputed) {
    std::vector<uint32_t> next;
    closure(nodes_[node].pos + 1, nodes_[node].parent, next);
    sort_unique(next);
    nodes_[node].successors_begin = static_cast<uint32_t>(successors_.size());
    successors_.insert(successors_.end(), next.begin(), next.end());
    nodes_[node].successors_end = static_cast<uint32_t>(successors_.size());
  }
  return {nodes_[node].successors_begin, nodes_[node].successors_end};
}

void GrammarMatcher::advance(const std::vector<uint32_t>& from, uint8_t byte,
                             std::vector<uint32_t>& to) {
  to.clear();
  size_t matched = 0;
  for (uint32_t node : from) {
    if (node == kAccept) continue;
    const GrammarElement& e = grammar_->elements[nodes_[node].pos];
    if (!grammar_->byte_sets[e.index].has(byte)) continue;
    const auto [begin, end] = successors(node);
    to.insert(to.end(), successors_.begin() + begin, successors_.begin() + end);
    ++matched;
  }
  if (matched > 1) sort_unique(to);
  if (to.size() > kMaxHeads) {
    fail("grammar: more than ", kMaxHeads, " parse stacks at once; the grammar is too ambiguous");
  }
}

bool GrammarMatcher::walk(std::string_view bytes, uint32_t& state) {
  uint32_t at = state_;
  for (char c : bytes) {
    if (states_.size() >= kMaxStates) restart_states({&at, 1});
    at = step(at, static_cast<uint8_t>(c));
    if (at == kDead) return false;
  }
  state = at;
  return true;
}

bool GrammarMatcher::is_end_token(TokenId token) const {
  return std::binary_search(end_tokens_.begin(), end_tokens_.end(), token);
}

bool GrammarMatcher::allows(TokenId token) {
  if (ended_) return false;
  if (is_end_token(token)) return can_end();
  if (token < 0 || token >= vocabulary_->n_vocab()) return false;
  const std::string& piece = vocabulary_->piece(token);
  return !piece.empty() && walk(piece, walk_result_);
}

void GrammarMatcher::accept(TokenId token) {
  if (!ended_ && is_end_token(token) && can_end()) {
    ended_ = true;
    std::vector<uint32_t> accept_only{kAccept};
    state_ = intern_state(accept_only);
    return;
  }
  if (!allows(token) || is_end_token(token)) fail("grammar: token ", token, " is not allowed here");
  state_ = walk_result_;
}

bool GrammarMatcher::accept_bytes(std::string_view bytes) {
  if (ended_ || !walk(bytes, walk_result_)) return false;
  state_ = walk_result_;
  return true;
}

template <typename Visit>
void GrammarMatcher::visit_allowed(Visit visit) {
  if (can_end())
    for (TokenId t : end_tokens_)
      if (t >= 0 && t < vocabulary_->n_vocab()) visit(t, kDead);
  // Depth-first over the trie; levels_[d] is the state after the first d bytes of the current
  // branch. A branch the grammar refuses is skipped whole.
  // This loop runs once per trie node (a third of a million for a 150k-token vocabulary) and,
  // in a string, hardly ever refuses a byte: it stays lean.
  const GrammarVocabulary::TrieNode* const trie = vocabulary_->trie().data();
  const size_t n_nodes = vocabulary_->trie().size();
  const TokenId* const tokens = vocabulary_->trie_tokens().data();
  uint32_t* const levels = levels_.data();
  levels[0] = state_;
  for (size_t i = 1; i < n_nodes;) {
    const GrammarVocabulary::TrieNode& node = trie[i];
    uint32_t state = transitions_[static_cast<size_t>(levels[node.depth - 1]) * 256 + node.byte];
    if (state == kUnknown) {
      if (states_.size() >= kMaxStates) restart_states({levels, node.depth});
      state = add_transition(levels[node.depth - 1], node.byte);
    }
    if (state == kDead) {
      i = node.subtree_end;
      continue;
    }
    levels[node.depth] = state;
    for (uint32_t k = node.tokens_begin; k < node.tokens_end; ++k)
      if (!end_tokens_in_trie_ || !is_end_token(tokens[k])) visit(tokens[k], state);
    ++i;
  }
}

const std::vector<uint64_t>& GrammarMatcher::allowed_tokens() {
  if (ended_) fail("grammar: the output has already ended");
  if (auto it = mask_cache_.find(state_); it != mask_cache_.end()) return it->second;
  if (mask_cache_.size() >= kMaxCachedMasks) mask_cache_.clear();
  std::vector<uint64_t> bits((static_cast<size_t>(vocabulary_->n_vocab()) + 63) / 64, 0);
  visit_allowed(
      [&](TokenId t, uint32_t) { bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63); });
  // state_ after the walk: restart_states may have renumbered it (and emptied the cache).
  return mask_cache_.emplace(state_, std::move(bits)).first->second;
}

uint32_t GrammarMatcher::completion_bytes(uint32_t node) {
  // A stack ends when every alternative on it does: the rests of them, summed from the top.
  chain_.clear();
  uint32_t n = node;
  for (; nodes_[n].completion_bytes == kNotComputed; n = nodes_[n].parent) chain_.push_back(n);
  uint64_t below = nodes_[n].completion_bytes;
  for (size_t i = chain_.size(); i-- > 0;) {
    below = std::min(kFarBytes, below + min_bytes_from_[nodes_[chain_[i]].pos]);
    nodes_[chain_[i]].completion_bytes = static_cast<uint32_t>(below);
  }
  return nodes_[node].completion_bytes;
}

int64_t GrammarMatcher::tokens_to_end(uint32_t state) {
  if (ended_) return 0;
  const int64_t known = states_[state].tokens_to_end;
  return known >= 0 ? known : add_tokens_to_end(state);
}

int64_t GrammarMatcher::add_tokens_to_end(uint32_t state) {
  const std::vector<uint32_t>& heads = states_[state].heads;
  int64_t n = 0;
  if (heads.size() != 1 || heads[0] != kAccept) {
    uint64_t bytes = kFarBytes;
    for (uint32_t head : heads)
      bytes = std::min<uint64_t>(bytes, head == kAccept ? 0 : completion_bytes(head));
    n = static_cast<int64_t>(bytes) + 1;  // and the end token
  }
  states_[state].tokens_to_end = n;
  return n;
}

int64_t GrammarMatcher::tokens_to_end() {
  return tokens_to_end(state_);
}

bool GrammarMatcher::ends_within(TokenId token, int64_t tokens_left) {
  if (is_end_token(token)) return true;
  return walk(vocabulary_->piece(token), walk_result_) &&
         tokens_to_end(walk_result_) <= tokens_left;
}

std::vector<uint64_t> GrammarMatcher::allowed_tokens_within(int64_t tokens_left) {
  if (ended_) fail("grammar: the output has already ended");
  std::vector<uint64_t> bits((static_cast<size_t>(vocabulary_->n_vocab()) + 63) / 64, 0);
  int64_t soonest = static_cast<int64_t>(kFarBytes) + 1;
  bool any = false;
  for (int pass = 0; pass < 2 && !any; ++pass) {
    // The second pass, when no token fits the budget: the tokens that end the output soonest.
    const int64_t limit = pass == 0 ? tokens_left : soonest;
    visit_allowed([&](TokenId t, uint32_t state) {
      const int64_t cost = state == kDead ? 0 : tokens_to_end(state);
      soonest = std::min(soonest, cost);
      if (cost > limit) return;
      bits[static_cast<size_t>(t) >> 6] |= uint64_t{1} << (t & 63);
      any = true;
    });
  }
  return bits;
}

}  // namespace k25
