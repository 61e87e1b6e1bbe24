// src/core/bits.h, src/core/json_nesting.h and src/core/text_file.h.
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <set>

#include "core/bits.h"
#include "core/error.h"
#include "core/json_nesting.h"
#include "core/rate_limited_warning.h"
#include "core/text_file.h"

namespace k25 {
namespace {

TEST(Bits, PowerOfTwo) {
  for (int64_t n : {1, 2, 4, 1024, 1 << 30}) EXPECT_TRUE(is_power_of_two(n)) << n;
  for (int64_t n : {0, -1, -2, 3, 6, 1000}) EXPECT_FALSE(is_power_of_two(n)) << n;
  EXPECT_TRUE(is_power_of_two(uint64_t{1} << 63));
  EXPECT_FALSE(is_power_of_two(~uint64_t{0}));
}

TEST(Bits, Splitmix64MatchesThePublishedSequence) {
  // The reference generator seeded with 0 (Vigna's splitmix64.c) starts with these values.
  uint64_t state = 0;
  EXPECT_EQ(splitmix64_next(state), 0xe220a8397b1dcdafull);
  EXPECT_EQ(splitmix64_next(state), 0x6e789e6aa1b965f4ull);
  EXPECT_EQ(splitmix64_next(state), 0x06c45d188009454full);
  EXPECT_EQ(splitmix64(0), 0xe220a8397b1dcdafull);
}

TEST(Bits, Splitmix64IsABijectionOnASample) {
  std::set<uint64_t> seen;
  for (uint64_t i = 0; i < 4096; ++i) seen.insert(splitmix64(i));
  EXPECT_EQ(seen.size(), 4096u);
}

// The depth after each byte of `text`, as digits (or '-' below zero).
std::string depths(std::string_view text) {
  JsonNesting nesting;
  std::string out;
  for (char c : text) {
    const int d = nesting.step(c);
    out += d < 0 ? '-' : static_cast<char>('0' + d);
  }
  return out;
}

TEST(JsonNesting, CountsBracketsOutsideStrings) {
  EXPECT_EQ(depths(R"({"a":[1,{}]})"), "111112223210");
  // Brackets in strings do not count, an escaped quote does not end one, and an escaped
  // backslash does not escape the quote after it.
  EXPECT_EQ(depths(R"(["{]","[)"), "11111111");
  EXPECT_EQ(depths(R"(["\"[",1])"), "111111110");
  EXPECT_EQ(depths(R"(["\\",[]])"), "111111210");
  EXPECT_EQ(depths("]"), "-");
  JsonNesting deep;
  for (int i = 0; i < 100; ++i) deep.step('[');
  EXPECT_EQ(deep.depth(), 100);
}

TEST(TextFile, ReadsEveryByte) {
  const std::string path = ::testing::TempDir() + "k25_text_file_test.bin";
  const std::string bytes("a\0b\r\nc", 6);
  std::ofstream(path, std::ios::binary) << bytes;
  EXPECT_EQ(read_text_file(path, "test"), bytes);
  std::remove(path.c_str());
}

TEST(TextFile, AMissingFileNamesWhatAndWhere) {
  try {
    read_text_file("/nonexistent/k25.txt", "--prompt-file");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "--prompt-file: cannot read '/nonexistent/k25.txt': No such file or directory");
  }
}

TEST(RateLimitedWarning, PrintsOncePerIntervalAndCountsTheRest) {
  using Clock = RateLimitedWarning::Clock;
  RateLimitedWarning warning(std::chrono::seconds(10));
  const Clock::time_point t0 = Clock::now();
  ::testing::internal::CaptureStderr();
  EXPECT_TRUE(warning.warn("disk slow", t0));
  EXPECT_FALSE(warning.warn("disk slow", t0 + std::chrono::seconds(1)));
  EXPECT_FALSE(warning.warn("disk slow", t0 + std::chrono::seconds(9)));
  EXPECT_TRUE(warning.warn("disk slower", t0 + std::chrono::seconds(10)));
  EXPECT_EQ(::testing::internal::GetCapturedStderr(),
            "warning: disk slow\nwarning: disk slower (2 similar suppressed)\n");
}

}  // namespace
}  // namespace k25
