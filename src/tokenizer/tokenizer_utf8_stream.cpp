// Utf8StreamDecoder (declared in tokenizer.h).
#include "tokenizer/tokenizer.h"
#include "tokenizer/unicode.h"

namespace k25 {

std::string Utf8StreamDecoder::push(std::string_view bytes) {
  pending_.append(bytes);
  std::string out;
  size_t pos = 0;
  while (pos < pending_.size()) {
    const unicode::Utf8Step step = unicode::decode_utf8(pending_, pos);
    if (step.truncated) break;  // may still complete with the next bytes
    if (step.valid) {
      out.append(pending_, pos, step.length);
    } else {
      unicode::append_utf8(out, unicode::kReplacementChar);
    }
    pos += step.length;
  }
  pending_.erase(0, pos);
  return out;
}

std::string Utf8StreamDecoder::flush() {
  std::string out;
  if (!pending_.empty()) unicode::append_utf8(out, unicode::kReplacementChar);
  pending_.clear();
  return out;
}

}  // namespace k25
