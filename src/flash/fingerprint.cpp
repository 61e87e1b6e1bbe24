#include "flash/fingerprint.h"

#include <algorithm>
#include <cmath>

#include "flash/simhash.h"

namespace k25 {

void DomainMatcher::add(std::string domain, uint64_t signature) {
  signatures_.emplace_back(signature, std::move(domain));
}

std::optional<std::pair<std::string, int>> DomainMatcher::match(uint64_t simhash) const {
  const std::pair<uint64_t, std::string>* best = nullptr;
  int best_distance = max_distance_ + 1;
  for (const auto& entry : signatures_) {
    const int d = hamming_distance(entry.first, simhash);
    if (d < best_distance) {
      best_distance = d;
      best = &entry;
    }
  }
  if (best == nullptr) return std::nullopt;
  return std::make_pair(best->second, best_distance);
}

const char* domain_source_name(DomainSource source) {
  switch (source) {
    case DomainSource::Header:
      return "header";
    case DomainSource::SimHash:
      return "simhash";
    case DomainSource::Default:
      break;
  }
  return "default";
}

GateFeatures gate_features(std::string_view text, int prompt_tokens, int response_tokens,
                           int priority) {
  GateFeatures f{};
  f[0] = static_cast<float>(std::log2(1.0 + std::max(0, prompt_tokens)) / 16.0);
  f[1] = static_cast<float>(std::log2(1.0 + std::max(0, response_tokens)) / 16.0);
  f[2] = static_cast<float>(priority) / 100.0f;
  f[3] = (prompt_tokens < 512 && response_tokens < 128) ? 1.0f : 0.0f;
  // Character mix over the first kSimHashCodePoints code points (continuation bytes of UTF-8
  // sequences are not counted as code points).
  int n = 0, letters = 0, digits = 0, spaces = 0, non_ascii = 0;
  for (size_t i = 0; i < text.size() && n < kSimHashCodePoints; ++i) {
    const auto b = static_cast<unsigned char>(text[i]);
    if ((b & 0xC0) == 0x80) continue;
    ++n;
    if (b >= 0x80) {
      ++non_ascii;
    } else if ((b | 0x20) >= 'a' && (b | 0x20) <= 'z') {
      ++letters;
    } else if (b >= '0' && b <= '9') {
      ++digits;
    } else if (b == ' ' || b == '\n' || b == '\t' || b == '\r') {
      ++spaces;
    }
  }
  const float inv = n > 0 ? 1.0f / static_cast<float>(n) : 0.0f;
  f[4] = static_cast<float>(letters) * inv;
  f[5] = static_cast<float>(digits) * inv;
  f[6] = static_cast<float>(spaces) * inv;
  f[7] = static_cast<float>(non_ascii) * inv;
  return f;
}

Fingerprint fingerprint_request(const FingerprintInput& in, const DomainMatcher* matcher) {
  Fingerprint fp;
  fp.prompt_tokens = in.prompt_tokens;
  fp.response_tokens = in.max_tokens;
  if (in.response_length_hint)
    fp.response_tokens = std::min(*in.response_length_hint, in.max_tokens);
  fp.priority = in.priority;
  fp.simhash = simhash64(in.prompt_text);
  if (in.domain_given) {
    fp.domain = in.domain_hint;
    fp.source = DomainSource::Header;
  } else if (matcher != nullptr) {
    if (auto m = matcher->match(fp.simhash)) {
      fp.domain = m->first;
      fp.simhash_distance = m->second;
      fp.source = DomainSource::SimHash;
    }
  }
  fp.features = gate_features(in.prompt_text, fp.prompt_tokens, fp.response_tokens, fp.priority);
  return fp;
}

}  // namespace k25
