// R-PR2: a domain gate, a 2-layer MLP (16 hidden units) from the fingerprint features to
// keep-scores of every block's attention and FFN, plus the domain's head mask. Stored as
// k25_metadata/<domain>_gate.bin; the parser treats the file as untrusted input.
//
// File layout (little-endian):
//   "K25GATE\0"  u32 version (1)  u32 n_features  u32 n_hidden  u32 n_layers  u32 n_heads
//   f32 w1[n_hidden][n_features]  f32 b1[n_hidden]  f32 w2[2*n_layers][n_hidden]
//   f32 b2[2*n_layers]  u8 head_mask[n_layers][ceil(n_heads/8)] (bit set = head off)
//   u64 FNV-1a 64 of every byte before it
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace k25 {

inline constexpr uint32_t kGateFormatVersion = 1;
inline constexpr int kGateHidden = 16;

struct GateMlp {
  int n_features = 0;
  int n_hidden = kGateHidden;
  int n_layers = 0;
  int n_heads = 0;
  std::vector<float> w1, b1, w2, b2;
  std::vector<uint8_t> head_off;  // [layer * n_heads + head]: 1 = masked

  // All weights zero (every keep-score 0.5) and no head masked.
  static GateMlp zero(int n_features, int n_layers, int n_heads);
  int n_outputs() const { return 2 * n_layers; }
  size_t n_parameters() const { return w1.size() + b1.size() + w2.size() + b2.size(); }
  // Keep-scores in (0, 1): [0, n_layers) attention of each block, [n_layers, 2 n_layers) FFN.
  // `features` has n_features values. Writes `hidden` (n_hidden) as scratch.
  void keep_scores(const float* features, float* hidden, float* scores) const;
  std::vector<float> keep_scores(const float* features) const;

  std::vector<uint8_t> serialize() const;
};

// Throws k25::Error naming `source` and the problem (bad magic, version, sizes, checksum,
// non-finite weights). Never reads outside [data, data + size).
GateMlp parse_gate(const uint8_t* data, size_t size, const std::string& source);
GateMlp load_gate_file(const std::string& path);
void save_gate_file(const GateMlp& gate, const std::string& path);

}  // namespace k25
