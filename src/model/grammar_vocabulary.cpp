#include "model/grammar_vocabulary.h"

#include <algorithm>
#include <numeric>

namespace k25 {

GrammarVocabulary::GrammarVocabulary(const Tokenizer& tokenizer) {
  const int n = tokenizer.n_vocab();
  pieces_.resize(static_cast<size_t>(n));
  std::vector<TokenId> order;
  for (TokenId id = 0; id < n; ++id) {
    if (tokenizer.is_end_of_generation(id)) end_of_generation_.push_back(id);
    pieces_[static_cast<size_t>(id)] = tokenizer.token_to_piece(id, false);
    if (!pieces_[static_cast<size_t>(id)].empty()) order.push_back(id);
  }
  std::stable_sort(order.begin(), order.end(),
                   [&](TokenId a, TokenId b) { return piece(a) < piece(b); });

  // Sorted pieces make the trie in depth-first order: each piece shares its longest common
  // prefix with the previous one and adds nodes for the rest.
  trie_.push_back({});
  std::vector<uint32_t> path{0};  // path[d]: the node at depth d on the current branch
  const auto close_to = [&](size_t depth) {
    while (path.size() > depth + 1) {
      trie_[path.back()].subtree_end = static_cast<uint32_t>(trie_.size());
      path.pop_back();
    }
  };
  const std::string* previous = nullptr;
  for (TokenId id : order) {
    const std::string& p = piece(id);
    size_t common = 0;
    if (previous) {
      const size_t limit = std::min(previous->size(), p.size());
      while (common < limit && (*previous)[common] == p[common]) ++common;
    }
    close_to(common);
    for (size_t d = common; d < p.size(); ++d) {
      TrieNode node;
      node.byte = static_cast<uint8_t>(p[d]);
      node.depth = static_cast<uint32_t>(d + 1);
      node.tokens_begin = node.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
      path.push_back(static_cast<uint32_t>(trie_.size()));
      trie_.push_back(node);
    }
    max_depth_ = std::max(max_depth_, static_cast<uint32_t>(p.size()));
    // Equal pieces are adjacent, so a node's tokens are a contiguous run.
    TrieNode& last = trie_[path.back()];
    if (last.tokens_begin == last.tokens_end)
      last.tokens_begin = static_cast<uint32_t>(trie_tokens_.size());
    trie_tokens_.push_back(id);
    last.tokens_end = static_cast<uint32_t>(trie_tokens_.size());
    previous = &p;
  }
  close_to(0);
  trie_[0].subtree_end = static_cast<uint32_t>(trie_.size());
}

}  // namespace k25
