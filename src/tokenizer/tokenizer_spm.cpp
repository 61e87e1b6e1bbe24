#include "tokenizer/tokenizer_spm.h"

#include <cstdio>
#include <queue>
#include <string>

#include "tokenizer/unicode.h"

namespace k25 {

SpmModel::SpmModel(const Vocab& vocab, const TokenIndex& index) : vocab_(vocab), index_(index) {
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof(name), "<0x%02X>", b);
    TokenId id = index.find(name);
    if (id < 0) id = index.find(std::string(1, static_cast<char>(b)));
    byte_ids_[b] = id >= 0 ? id : vocab.unk;
  }
}

void SpmModel::encode(std::string_view text, std::vector<TokenId>& out) const {
  // Symbols are byte spans of the text, one per UTF-8 character at first, in a linked list.
  struct Symbol {
    int32_t prev, next;
    size_t start, length;  // length 0: merged into its left neighbour
  };
  struct Bigram {
    float score;
    int32_t left;
    size_t length;  // merged length; a mismatch means a side changed since it was queued
    bool operator<(const Bigram& o) const {
      // Highest score first; among equal scores, the leftmost.
      return score != o.score ? score < o.score : left > o.left;
    }
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const size_t len = unicode::decode_utf8(text, pos).length;
    const int32_t i = static_cast<int32_t>(sym.size());
    sym.push_back({i - 1, pos + len < text.size() ? i + 1 : -1, pos, len});
    pos += len;
  }
  std::priority_queue<Bigram> heap;
  auto consider = [&](int32_t left) {
    if (left < 0 || sym[left].next < 0) return;
    const Symbol& l = sym[left];
    const Symbol& r = sym[l.next];
    const std::string_view piece = text.substr(l.start, l.length + r.length);
    const TokenId id = index_.find(piece);
    if (id >= 0) heap.push({vocab_.scores[id], left, piece.size()});
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(sym.size()); ++i) consider(i);
  while (!heap.empty()) {
    const Bigram b = heap.top();
    heap.pop();
    Symbol& l = sym[b.left];
    if (l.length == 0 || l.next < 0) continue;
    Symbol& r = sym[l.next];
    if (l.length + r.length != b.length) continue;
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (l.next >= 0) sym[l.next].prev = b.left;
    consider(l.prev);
    consider(b.left);
  }
  for (int32_t i = sym.empty() ? -1 : 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].start, sym[i].length);
    const TokenId id = index_.find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (char c : piece) {
      const TokenId byte_id = byte_ids_[static_cast<uint8_t>(c)];
      if (byte_id >= 0) out.push_back(byte_id);
    }
  }
}

int parse_byte_token(std::string_view text) {
  if (text.size() != 6 || !text.starts_with("<0x") || text[5] != '>') return -1;
  int value = 0;
  for (char c : text.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

std::string spm_escape_spaces(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += "\xE2\x96\x81";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace k25
