// Runs a Grammar over the output of one request, token by token. The state is a set of parse
// stacks (a stack-based recogniser over bytes: a token may span several grammar elements and end
// inside a UTF-8 character). Stacks are nodes in an arena, shared and deduplicated, and each
// node's successors after its byte class matches are computed once.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
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

  bool can_end() const { return !heads_.empty() && heads_.back() == kAccept; }
  // Nothing can follow: the output is a whole sentence of the grammar and ends here.
  bool is_complete() const { return heads_.size() == 1 && heads_[0] == kAccept; }
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

  uint32_t intern(uint32_t pos, uint32_t parent);
  // Adds to `out` the heads reached from "match element `pos`, then return to `parent`".
  void closure(uint32_t pos, uint32_t parent, std::vector<uint32_t>& out);
  // The heads after head `node` matched its byte (index range into successors_).
  std::pair<uint32_t, uint32_t> successors(uint32_t node);
  void advance(const std::vector<uint32_t>& from, uint8_t byte, std::vector<uint32_t>& to);
  bool walk(std::string_view bytes, std::vector<uint32_t>& state);
  // Calls visit(token, state after it) for every allowed token (state: null for end tokens).
  template <typename Visit>
  void visit_allowed(Visit visit);
  uint32_t completion_bytes(uint32_t node);
  int64_t tokens_to_end(const std::vector<uint32_t>& state);

  std::shared_ptr<const Grammar> grammar_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
  std::vector<TokenId> end_tokens_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, uint32_t> node_index_;
  std::vector<uint32_t> successors_;
  // Per element: the fewest bytes from it to the end of its alternative.
  std::vector<uint32_t> min_bytes_from_;
  std::vector<uint32_t> heads_;  // sorted; kAccept last when present
  bool ended_ = false;           // an end token was accepted
  std::map<std::vector<uint32_t>, std::vector<uint64_t>> mask_cache_;
  // Scratch.
  std::vector<std::pair<uint32_t, uint32_t>> work_;
  std::unordered_set<uint64_t> visited_;
  std::vector<std::vector<uint32_t>> levels_;
  std::vector<uint32_t> walk_a_, walk_b_, walk_result_, chain_;
  std::vector<float> scratch_logits_;
};

}  // namespace k25
