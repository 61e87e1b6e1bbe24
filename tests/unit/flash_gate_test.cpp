// R-PR2 gate files and the domain map: round trips, and every kind of corruption is a clear
// error, never a crash.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "flash/domain_map.h"
#include "flash/gate.h"

namespace k25 {
namespace {

GateMlp sample_gate() {
  GateMlp g = GateMlp::zero(8, 5, 8);
  for (size_t i = 0; i < g.w1.size(); ++i) g.w1[i] = 0.01f * static_cast<float>(i % 17) - 0.08f;
  for (size_t i = 0; i < g.w2.size(); ++i) g.w2[i] = 0.02f * static_cast<float>(i % 13) - 0.1f;
  g.b2[3] = 2.0f;
  g.head_off[1 * 8 + 3] = 1;
  g.head_off[4 * 8 + 7] = 1;
  return g;
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  try {
    parse_gate(bytes.data(), bytes.size(), "g.bin");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Gate, RoundTripKeepsWeightsAndHeadMask) {
  const GateMlp g = sample_gate();
  const std::vector<uint8_t> bytes = g.serialize();
  const GateMlp back = parse_gate(bytes.data(), bytes.size(), "mem");
  EXPECT_EQ(back.w1, g.w1);
  EXPECT_EQ(back.b2, g.b2);
  EXPECT_EQ(back.w2, g.w2);
  EXPECT_EQ(back.head_off, g.head_off);
  EXPECT_EQ(back.n_layers, 5);
  EXPECT_EQ(back.n_heads, 8);
  const float features[8] = {0.1f, 0.2f, 0.5f, 1, 0.6f, 0, 0.2f, 0};
  EXPECT_EQ(back.keep_scores(features), g.keep_scores(features));

  const std::string path =
      (std::filesystem::temp_directory_path() / ("k25_gate_test_" + std::to_string(getpid())))
          .string();
  save_gate_file(g, path);
  EXPECT_EQ(load_gate_file(path).w1, g.w1);
  std::filesystem::remove(path);
  EXPECT_THROW(load_gate_file(path), Error);
}

TEST(Gate, KeepScoresAreSigmoidOfTheMlp) {
  GateMlp g = GateMlp::zero(8, 2, 4);
  const float f[8] = {};
  for (float s : g.keep_scores(f)) EXPECT_FLOAT_EQ(s, 0.5f);
  g.b2[1] = 100.0f;
  EXPECT_GT(g.keep_scores(f)[1], 0.99f);
  EXPECT_EQ(g.n_parameters(), 16u * 8 + 16 + 4 * 16 + 4);
}

TEST(Gate, CorruptionIsAClearError) {
  const std::vector<uint8_t> good = sample_gate().serialize();
  EXPECT_NE(parse_error({}).find("bad magic"), std::string::npos);
  std::vector<uint8_t> b = good;
  b[0] = 'X';
  EXPECT_NE(parse_error(b).find("bad magic"), std::string::npos);
  b = good;
  b[40] ^= 0x01;  // a weight bit
  EXPECT_NE(parse_error(b).find("checksum"), std::string::npos);
  b = good;
  b.resize(b.size() - 20);
  EXPECT_NE(parse_error(b).find("bytes"), std::string::npos);
  b = good;
  b[8] = 9;  // version
  EXPECT_NE(parse_error(b).find("version"), std::string::npos);
  b = good;
  b[20] = 0xFF;  // n_layers huge
  b[21] = 0xFF;
  EXPECT_NE(parse_error(b).find("out of range"), std::string::npos);
  // Every truncation fails cleanly.
  for (size_t n = 0; n < good.size(); ++n) {
    std::vector<uint8_t> cut(good.begin(), good.begin() + n);
    EXPECT_FALSE(parse_error(cut).empty()) << n;
  }
}

TEST(Gate, NonFiniteWeightsAreRejectedEvenWithAValidChecksum) {
  GateMlp g = sample_gate();
  g.w1[2] = std::nanf("");
  const std::vector<uint8_t> bytes = g.serialize();
  EXPECT_NE(parse_error(bytes).find("not finite"), std::string::npos);
}

TEST(DomainMap, RoundTripAndValidation) {
  std::vector<DomainEntry> entries = {
      {"default", "default_gate.bin", 0.35, {0x0123456789abcdefull}},
      {"legal", "legal_gate.bin", 0.42, {}}};
  const std::string text = domain_map_json(entries);
  const std::vector<DomainEntry> back = parse_domain_map(text, "map.json");
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].name, "default");
  EXPECT_EQ(back[0].signatures, entries[0].signatures);
  EXPECT_DOUBLE_EQ(back[1].pruning_ratio, 0.42);

  const auto err = [](const std::string& json) {
    try {
      parse_domain_map(json, "map.json");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  EXPECT_NE(err("{").find("not valid JSON"), std::string::npos);
  EXPECT_NE(err("[]").find("object"), std::string::npos);
  EXPECT_NE(err(R"({"legal": {"gate_file": "l.bin"}})").find("no 'default'"), std::string::npos);
  EXPECT_NE(err(R"({"default": {"gate_file": "../x.bin"}})").find("plain file name"),
            std::string::npos);
  EXPECT_NE(err(R"({"default": {"gate_file": "d.bin", "pruning_ratio": 1.5}})").find("outside"),
            std::string::npos);
  EXPECT_NE(err(R"({"default": {"gate_file": "d.bin", "signatures": ["xyz"]}})").find("hex"),
            std::string::npos);
  EXPECT_NE(err(R"({"bad name!": {"gate_file": "d.bin"}})").find("domain name"), std::string::npos);
  EXPECT_TRUE(is_valid_domain_name("legal"));
  EXPECT_FALSE(is_valid_domain_name(""));
}

}  // namespace
}  // namespace k25
