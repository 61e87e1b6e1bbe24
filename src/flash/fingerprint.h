// R-FP4: the request fingerprint, built from the header hints (R-FP1), the true prompt length and
// a SimHash of the prompt text (R-FP2) matched against known domain signatures. No model call.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k25 {

// Length of the feature vector the gates read.
inline constexpr int kGateFeatures = 8;
using GateFeatures = std::array<float, kGateFeatures>;

// Domain signatures: SimHashes of known domain templates. The nearest signature within
// max_distance bits names the domain.
class DomainMatcher {
 public:
  explicit DomainMatcher(int max_distance = 10) : max_distance_(max_distance) {}
  void add(std::string domain, uint64_t signature);
  // (domain, distance) of the nearest signature within max_distance; ties go to the first added.
  std::optional<std::pair<std::string, int>> match(uint64_t simhash) const;
  int max_distance() const { return max_distance_; }
  bool empty() const { return signatures_.empty(); }

 private:
  int max_distance_;
  std::vector<std::pair<uint64_t, std::string>> signatures_;
};

struct FingerprintInput {
  std::string_view prompt_text;  // the prompt as the model sees it (chat: rendered)
  int prompt_tokens = 0;         // true count after tokenising (the header is only a hint)
  int max_tokens = 0;            // the request's cap on generated tokens
  std::optional<int> response_length_hint;  // x-response-length
  int priority = 50;                        // from x-latency-sla
  std::string domain_hint = "default";      // x-domain-hint
  bool domain_given = false;
};

enum class DomainSource { Header, SimHash, Default };
const char* domain_source_name(DomainSource source);

struct Fingerprint {
  int prompt_tokens = 0;
  int response_tokens = 0;  // expected: min(x-response-length, max_tokens)
  int priority = 50;
  std::string domain = "default";
  DomainSource source = DomainSource::Default;
  uint64_t simhash = 0;
  int simhash_distance = -1;  // distance to the matched signature; -1 when not matched
  GateFeatures features{};
};

// Gate features of a request (also what calibration feeds the gates): log-scaled prompt and
// response lengths, priority, the short-request flag and the character mix of the first
// kSimHashCodePoints code points (letters, digits, whitespace, non-ASCII).
GateFeatures gate_features(std::string_view prompt_text, int prompt_tokens, int response_tokens,
                           int priority);

// `matcher` may be null (no calibrated metadata: the domain is the hint or "default").
Fingerprint fingerprint_request(const FingerprintInput& in, const DomainMatcher* matcher);

}  // namespace k25
