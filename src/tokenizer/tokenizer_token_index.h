// Token text -> id lookup with string_view keys (no allocation per lookup).
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace k25 {

struct StringViewHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};

class TokenIndex {
 public:
  TokenIndex() = default;
  // When a text occurs more than once the last id wins (as llama.cpp does).
  explicit TokenIndex(const std::vector<std::string>& tokens) {
    map_.reserve(tokens.size());
    for (size_t i = 0; i < tokens.size(); ++i) map_[tokens[i]] = static_cast<TokenId>(i);
  }
  // -1 when absent.
  TokenId find(std::string_view text) const {
    const auto it = map_.find(text);
    return it == map_.end() ? -1 : it->second;
  }

 private:
  std::unordered_map<std::string, TokenId, StringViewHash, std::equal_to<>> map_;
};

}  // namespace k25
