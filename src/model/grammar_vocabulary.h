// The vocabulary as constrained decoding sees it: each token's bytes (the text the engine
// emits for it) in a byte trie, so that one walk of the trie together with the grammar state
// decides every token and prunes a whole subtree at the first byte the grammar refuses.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace k25 {

class GrammarVocabulary {
 public:
  // Trie nodes in depth-first order; node 0 is the root (the empty prefix).
  struct TrieNode {
    uint8_t byte = 0;                           // the byte on the edge from the parent
    uint32_t depth = 0;                         // bytes from the root
    uint32_t subtree_end = 0;                   // index of the first node after this node's subtree
    uint32_t tokens_begin = 0, tokens_end = 0;  // tokens whose bytes end here (trie_tokens())
  };

  explicit GrammarVocabulary(const Tokenizer& tokenizer);

  int n_vocab() const { return static_cast<int>(pieces_.size()); }
  // Empty for control and unused tokens: those never match a grammar.
  const std::string& piece(TokenId id) const { return pieces_[static_cast<size_t>(id)]; }
  const std::vector<TokenId>& end_of_generation() const { return end_of_generation_; }
  const std::vector<TrieNode>& trie() const { return trie_; }
  const std::vector<TokenId>& trie_tokens() const { return trie_tokens_; }
  uint32_t max_depth() const { return max_depth_; }

 private:
  std::vector<std::string> pieces_;
  std::vector<TokenId> end_of_generation_;
  std::vector<TrieNode> trie_;
  std::vector<TokenId> trie_tokens_;
  uint32_t max_depth_ = 0;
};

// Built on first use (any thread), then shared: the engine holds one per model.
class LazyGrammarVocabulary {
 public:
  std::shared_ptr<const GrammarVocabulary> get(const Tokenizer& tokenizer) {
    std::call_once(once_, [&] { vocabulary_ = std::make_shared<GrammarVocabulary>(tokenizer); });
    return vocabulary_;
  }

 private:
  std::once_flag once_;
  std::shared_ptr<const GrammarVocabulary> vocabulary_;
};

}  // namespace k25
