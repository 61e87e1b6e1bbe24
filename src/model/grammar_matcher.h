// Runs a Grammar over the output of one request, token by token. The state is a set of parse
// stacks (a stack-based recogniser over bytes: a token may span several grammar elements and end
// inside a UTF-8 character). Stacks are nodes in an arena, shared and deduplicated, and each
// node's successors after its byte class matches are computed once. Sets of stacks are interned
// too, with each byte transition between them and each set's tokens_to_end computed once, so that
// a mask, which walks the whole vocabulary trie, mostly looks transitions up.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "model/grammar.h"
#include "model/grammar_vocabulary.h"

namespace k25 {

class GrammarMatcher {
 public:
  // `end_tokens` end the output (end-of-generation and a request's stop tokens): allowed only
  // where the grammar may end.
  GrammarMatcher(std::shared_ptr<const Grammar> grammar,
                 std::shared_ptr<const GrammarVocabulary> vocabulary,
                 std::vector<TokenId> end_tokens);

  // Whether `token` keeps the output a prefix of the language (end tokens: can_end()).
  bool allows(TokenId token);
  // Advances over the token; throws k25::Error when it is not allowed.
  void accept(TokenId token);
  // Advances over bytes; false (and no change) when they leave the language.
  bool accept_bytes(std::string_view bytes);
  // The allowed tokens as a bitset over the vocabulary (bit t of word t / 64). Cached per state.
  const std::vector<uint64_t>& allowed_tokens();

  // Ending within a token budget (docs/constrained-decoding.md, "Ending within max_tokens"): the
  // fewest tokens that end the output from here, counting one token per byte of the shortest
  // completion plus the end token (0 once the output is complete). An upper bound whenever the
  // vocabulary has one-byte tokens for those bytes.
  int64_t tokens_to_end();
  // Whether the output can still end within `tokens_left` more tokens after `token` (allowed).
  bool ends_within(TokenId token, int64_t tokens_left);
  // The allowed tokens after which the output can end within `tokens_left` more tokens; when no
  // token can, those after which it ends soonest. Not cached (asked for near the budget's end).
  std::vector<uint64_t> allowed_tokens_within(int64_t tokens_left);

  bool can_end() const { return !heads().empty() && heads().back() == kAccept; }
  // Nothing can follow: the output is a whole sentence of the grammar and ends here.
  bool is_complete() const { return heads().size() == 1 && heads()[0] == kAccept; }
  bool is_end_token(TokenId token) const;
  int n_vocab() const { return vocabulary_->n_vocab(); }
  // Working memory for sample_constrained (grammar_sampling.h): one row of logits.
  std::vector<float>& scratch_logits() { return scratch_logits_; }

 private:
  static constexpr uint32_t kAccept = 0xFFFFFFFFu;  // the empty stack: the grammar may end
  static constexpr uint32_t kRoot = 0;              // parent of the outermost rule
  static constexpr uint32_t kNotComputed = 0xFFFFFFFFu;
  struct Node {
    uint32_t pos = 0;     // element to match next (Bytes at a head, Rule inside a stack)
    uint32_t parent = 0;  // the stack to return to when the alternative ends
    uint32_t successors_begin = kNotComputed, successors_end = 0;
    uint32_t completion_bytes = kNotComputed;  // the shortest way to the end from this stack
  };

  // An interned set of stacks (sorted; kAccept last when present).
  struct State {
    std::vector<uint32_t> heads;
    int64_t tokens_to_end = -1;  // -1: not computed yet
  };
  struct HeadsHash {
    size_t operator()(const std::vector<uint32_t>& heads) const;
  };
  static constexpr uint32_t kUnknown = 0xFFFFFFFFu;  // a transition not computed yet
  static constexpr uint32_t kDead = 0xFFFFFFFEu;     // the transition leaves the language

  const std::vector<uint32_t>& heads() const { return states_[state_].heads; }
  uint32_t intern_state(std::vector<uint32_t>& heads);  // takes the heads when new
  // The state after `byte` from `state` (kDead when the byte leaves the language), memoized.
  // Inline: visit_allowed calls it once per trie node.
  uint32_t step(uint32_t state, uint8_t byte) {
    const uint32_t next = transitions_[static_cast<size_t>(state) * 256 + byte];
    return next != kUnknown ? next : add_transition(state, byte);
  }
  uint32_t add_transition(uint32_t state, uint8_t byte);  // step's first time
  // Bounds the memo (called when it holds kMaxStates states): starts it again from the current
  // state and those in `held` (renumbered in place).
  void restart_states(std::span<uint32_t> held);

  uint32_t intern(uint32_t pos, uint32_t parent);
  // Adds to `out` the heads reached from "match element `pos`, then return to `parent`".
  void closure(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);
  // The heads after head `node` matched its byte (index range into successors_).
  std::pair<uint32_t, uint32_t> successors(uint32_t node);
  void advance(const std::vector<uint32_t>& from, uint8_t byte, std::vector<uint32_t>& to);
  // The state after `bytes` from the current one; false when they leave the language.
  bool walk(std::string_view bytes, uint32_t& state);
  // Calls visit(token, state after it) for every allowed token (state: kDead for end tokens).
  template <typename Visit>
  void visit_allowed(Visit visit);
  uint32_t completion_bytes(uint32_t node);
  int64_t tokens_to_end(uint32_t state);
  int64_t add_tokens_to_end(uint32_t state);  // its first time for `state`

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  std::vector<TokenId> end_tokens_;
  bool end_tokens_in_trie_ = false;  // an end token has bytes (a stop token that is text)
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;
  std::vector<uint32_t> successors_;
  // Per element: the fewest bytes from it to the end of its alternative.
  std::vector<uint32_t> min_bytes_from_;
  std::vector<State> states_;
  std::unordered_map<std::vector<uint32_t>, uint32_t, HeadsHash> state_index_;
  std::vector<uint32_t> transitions_;  // 256 per state: the state after each byte, or kUnknown
  uint32_t state_ = 0;                 // the current state, in states_
  bool ended_ = false;                 // an end token was accepted
  std::unordered_map<uint32_t, std::vector<uint64_t>> mask_cache_;  // by state
  // Scratch.
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
  std::vector<uint32_t> levels_;  // visit_allowed: the state at each depth of the trie branch
  std::vector<uint32_t> next_heads_, chain_;
  uint32_t walk_result_ = 0;
  std::vector<float> scratch_logits_;
};

}  // namespace k25
