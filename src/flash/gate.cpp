#include "flash/gate.h"

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/error.h"

namespace k25 {

namespace {

constexpr char kMagic[8] = {'K', '2', '5', 'G', 'A', 'T', 'E', '\0'};
constexpr uint32_t kMaxFeatures = 256, kMaxHidden = 256, kMaxLayers = 1024, kMaxHeads = 1024;

uint64_t fnv1a64(const uint8_t* data, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (size_t i = 0; i < n; ++i) {
    h ^= data[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void put_u32(std::vector<uint8_t>& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}

void put_floats(std::vector<uint8_t>& out, const std::vector<float>& v) {
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    put_u32(out, bits);
  }
}

// Bounds-checked little-endian reader.
class Reader {
 public:
  Reader(const uint8_t* data, size_t size, const std::string& source)
      : data_(data), size_(size), source_(source) {}
  uint32_t u32(const char* what) {
    need(4, what);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{data_[pos_ + i]} << (8 * i);
    pos_ += 4;
    return v;
  }
  std::vector<float> floats(size_t n, const char* what) {
    std::vector<float> out(n);
    for (size_t i = 0; i < n; ++i) {
      const uint32_t bits = u32(what);
      std::memcpy(&out[i], &bits, 4);
      if (!std::isfinite(out[i])) fail(source_, ": gate ", what, "[", i, "] is not finite");
    }
    return out;
  }
  void need(size_t n, const char* what) const {
    if (size_ - pos_ < n) fail(source_, ": gate file truncated in ", what);
  }
  size_t pos() const { return pos_; }
  void skip(size_t n) { pos_ += n; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& source_;
};

}  // namespace

GateMlp GateMlp::zero(int n_features, int n_layers, int n_heads) {
  GateMlp g;
  g.n_features = n_features;
  g.n_layers = n_layers;
  g.n_heads = n_heads;
  g.w1.assign(static_cast<size_t>(g.n_hidden) * n_features, 0.0f);
  g.b1.assign(g.n_hidden, 0.0f);
  g.w2.assign(static_cast<size_t>(g.n_outputs()) * g.n_hidden, 0.0f);
  g.b2.assign(g.n_outputs(), 0.0f);
  g.head_off.assign(static_cast<size_t>(n_layers) * n_heads, 0);
  return g;
}

void GateMlp::keep_scores(const float* features, float* hidden, float* scores) const {
  for (int j = 0; j < n_hidden; ++j) {
    float a = b1[j];
    for (int i = 0; i < n_features; ++i) a += w1[j * n_features + i] * features[i];
    hidden[j] = std::tanh(a);
  }
  for (int o = 0; o < n_outputs(); ++o) {
    float a = b2[o];
    for (int j = 0; j < n_hidden; ++j) a += w2[o * n_hidden + j] * hidden[j];
    scores[o] = 1.0f / (1.0f + std::exp(-a));
  }
}

std::vector<float> GateMlp::keep_scores(const float* features) const {
  std::vector<float> hidden(n_hidden), scores(n_outputs());
  keep_scores(features, hidden.data(), scores.data());
  return scores;
}

std::vector<uint8_t> GateMlp::serialize() const {
  std::vector<uint8_t> out(kMagic, kMagic + 8);
  put_u32(out, kGateFormatVersion);
  put_u32(out, static_cast<uint32_t>(n_features));
  put_u32(out, static_cast<uint32_t>(n_hidden));
  put_u32(out, static_cast<uint32_t>(n_layers));
  put_u32(out, static_cast<uint32_t>(n_heads));
  put_floats(out, w1);
  put_floats(out, b1);
  put_floats(out, w2);
  put_floats(out, b2);
  const int mask_bytes = (n_heads + 7) / 8;
  for (int l = 0; l < n_layers; ++l) {
    for (int b = 0; b < mask_bytes; ++b) {
      uint8_t byte = 0;
      for (int k = 0; k < 8 && b * 8 + k < n_heads; ++k) {
        if (head_off[static_cast<size_t>(l) * n_heads + b * 8 + k]) byte |= uint8_t(1u << k);
      }
      out.push_back(byte);
    }
  }
  const uint64_t sum = fnv1a64(out.data(), out.size());
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(sum >> (8 * i)));
  return out;
}

GateMlp parse_gate(const uint8_t* data, size_t size, const std::string& source) {
  if (size < 8 || std::memcmp(data, kMagic, 8) != 0) {
    fail(source, ": not a k25 gate file (bad magic)");
  }
  if (size < 16) fail(source, ": gate file truncated in the header");
  uint64_t stored = 0;
  for (int i = 0; i < 8; ++i) stored |= uint64_t{data[size - 8 + i]} << (8 * i);
  Reader r(data, size - 8, source);
  r.skip(8);
  const uint32_t version = r.u32("version");
  if (version != kGateFormatVersion) {
    fail(source, ": gate format version ", version, " (this build reads ", kGateFormatVersion, ")");
  }
  const uint32_t n_features = r.u32("n_features"), n_hidden = r.u32("n_hidden");
  const uint32_t n_layers = r.u32("n_layers"), n_heads = r.u32("n_heads");
  if (n_features == 0 || n_features > kMaxFeatures || n_hidden == 0 || n_hidden > kMaxHidden ||
      n_layers == 0 || n_layers > kMaxLayers || n_heads == 0 || n_heads > kMaxHeads) {
    fail(source, ": gate shape out of range (features ", n_features, ", hidden ", n_hidden,
         ", layers ", n_layers, ", heads ", n_heads, ")");
  }
  // All sizes are bounded above, so these products cannot overflow.
  const size_t n_out = 2 * size_t{n_layers};
  const size_t body = 4 * (size_t{n_hidden} * n_features + n_hidden + n_out * n_hidden + n_out) +
                      size_t{n_layers} * ((n_heads + 7) / 8);
  if (size - 8 - r.pos() != body) {
    fail(source, ": gate file has ", size, " bytes, its header implies ", r.pos() + body + 8);
  }
  if (fnv1a64(data, size - 8) != stored) fail(source, ": gate checksum mismatch (corrupt file)");
  GateMlp g;
  g.n_features = static_cast<int>(n_features);
  g.n_hidden = static_cast<int>(n_hidden);
  g.n_layers = static_cast<int>(n_layers);
  g.n_heads = static_cast<int>(n_heads);
  g.w1 = r.floats(size_t{n_hidden} * n_features, "w1");
  g.b1 = r.floats(n_hidden, "b1");
  g.w2 = r.floats(n_out * n_hidden, "w2");
  g.b2 = r.floats(n_out, "b2");
  g.head_off.assign(size_t{n_layers} * n_heads, 0);
  const size_t mask_bytes = (n_heads + 7) / 8;
  const uint8_t* mask = data + r.pos();
  for (size_t l = 0; l < n_layers; ++l) {
    for (size_t h = 0; h < n_heads; ++h) {
      g.head_off[l * n_heads + h] = (mask[l * mask_bytes + h / 8] >> (h % 8)) & 1;
    }
    if (n_heads % 8 != 0 && (mask[l * mask_bytes + mask_bytes - 1] >> (n_heads % 8)) != 0) {
      fail(source, ": gate head mask of layer ", l, " has bits beyond head ", n_heads - 1);
    }
  }
  return g;
}

GateMlp load_gate_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, ": cannot open gate file");
  std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
  return parse_gate(bytes.data(), bytes.size(), path);
}

void save_gate_file(const GateMlp& gate, const std::string& path) {
  const std::vector<uint8_t> bytes = gate.serialize();
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
  if (!out) fail(path, ": cannot write gate file");
}

}  // namespace k25
