#include "tokenizer/tokenizer_bpe.h"

#include <cstdio>
#include <queue>

#include "tokenizer/unicode.h"

namespace k25 {

const std::array<uint32_t, 256>& byte_level_codepoints() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    uint32_t next = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174;
      t[b] = printable ? b : next++;
    }
    return t;
  }();
  return table;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& table = byte_level_codepoints();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) unicode::append_utf8(out, table[static_cast<uint8_t>(c)]);
  return out;
}

std::string byte_level_decode(std::string_view text) {
  static const std::unordered_map<uint32_t, char> reverse = [] {
    std::unordered_map<uint32_t, char> r;
    const auto& table = byte_level_codepoints();
    for (int b = 0; b < 256; ++b) r[table[b]] = static_cast<char>(b);
    return r;
  }();
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const unicode::Utf8Step step = unicode::decode_utf8(text, pos);
    const auto it = step.valid ? reverse.find(step.codepoint) : reverse.end();
    if (it != reverse.end()) {
      out += it->second;
    } else {
      out.append(text.substr(pos, step.length));
    }
    pos += step.length;
  }
  return out;
}

BpeModel::BpeModel(const std::vector<std::string>& merges, const TokenIndex& index, Options options)
    : index_(index), options_(options) {
  const auto& table = byte_level_codepoints();
  for (int b = 0; b < 256; ++b) {
    if (options.byte_level) {
      std::string ch;
      unicode::append_utf8(ch, table[b]);
      byte_ids_[b] = index.find(ch);
    } else {
      char name[8];
      std::snprintf(name, sizeof(name), "<0x%02X>", b);
      byte_ids_[b] = index.find(name);
    }
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    const std::string& m = merges[rank];
    // The separator is the first space after the first character (a part may start with one).
    const size_t sep = m.find(' ', 1);
    if (sep == std::string::npos) continue;
    const std::string_view left = std::string_view(m).substr(0, sep);
    const std::string_view right = std::string_view(m).substr(sep + 1);
    const TokenId l = index.find(left), r = index.find(right);
    joined.assign(left);
    joined.append(right);
    const TokenId result = index.find(joined);
    if (l < 0 || r < 0 || result < 0) continue;
    merges_.try_emplace(pair_key(l, r), Merge{static_cast<int32_t>(rank), result});
  }
}

TokenId BpeModel::whole_word(std::string_view word) const {
  if (options_.byte_level) {
    return options_.ignore_merges ? index_.find(byte_level_encode(word)) : -1;
  }
  const bool newlines = word.find_first_not_of('\n') == std::string_view::npos;
  return options_.ignore_merges || newlines ? index_.find(word) : -1;
}

void BpeModel::encode_word(std::string_view word, TokenId unk, std::vector<TokenId>& out) const {
  if (word.empty()) return;
  if (const TokenId whole = whole_word(word); whole >= 0) {
    out.push_back(whole);
    return;
  }
  // Symbols start as one per byte (byte-level) or per UTF-8 character (raw), in a linked list;
  // a heap of candidate merges ordered by (rank, position) picks the best one. Stale candidates
  // are detected by their ids.
  struct Symbol {
    TokenId id;  // -1: not a token (raw) or merged away (dead)
    int32_t prev, next;
    uint32_t start, length;
  };
  struct Candidate {
    int32_t rank, left;
    TokenId left_id, right_id;
    bool operator>(const Candidate& o) const {
      return rank != o.rank ? rank > o.rank : left > o.left;
    }
  };
  std::vector<Symbol> sym;
  sym.reserve(word.size());
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = options_.byte_level ? 1 : unicode::decode_utf8(word, pos).length;
    const TokenId id = options_.byte_level ? byte_ids_[static_cast<uint8_t>(word[pos])]
                                           : index_.find(word.substr(pos, len));
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({id, i - 1, pos + len < word.size() ? i + 1 : -1, static_cast<uint32_t>(pos),
                   static_cast<uint32_t>(len)});
    pos += len;
  }
  const int32_t n = static_cast<int32_t>(sym.size());
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  auto consider = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = sym[left].next;
    if (right < 0 || sym[left].id < 0 || sym[right].id < 0) return;
    const auto it = merges_.find(pair_key(sym[left].id, sym[right].id));
    if (it != merges_.end()) heap.push({it->second.rank, left, sym[left].id, sym[right].id});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Candidate c = heap.top();
    heap.pop();
    Symbol& left = sym[c.left];
    if (left.id != c.left_id || left.next < 0 || sym[left.next].id != c.right_id) continue;
    const Symbol right = sym[left.next];
    left.id = merges_.at(pair_key(c.left_id, c.right_id)).result;
    left.length += right.length;
    sym[left.next].id = -1;  // dead
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = c.left;
    consider(left.prev);
    consider(c.left);
  }
  for (int32_t i = 0; i >= 0 && i < n; i = sym[i].next) {
    if (sym[i].id >= 0) {
      out.push_back(sym[i].id);
    } else if (!options_.byte_level) {
      for (char c : word.substr(sym[i].start, sym[i].length)) {
        if (const TokenId b = byte_ids_[static_cast<uint8_t>(c)]; b >= 0) out.push_back(b);
      }
    } else if (unk >= 0) {
      out.push_back(unk);
    }
  }
}

}  // namespace k25
