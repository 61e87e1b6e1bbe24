#include "core/crc32c.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace k25 {
namespace {

TEST(Crc32c, KnownVectors) {
  // The CRC-32C check value, and the RFC 3720 (iSCSI) appendix B.4 vectors.
  EXPECT_EQ(crc32c("123456789", 9), 0xE3069283u);
  std::vector<unsigned char> zeros(32, 0x00), ones(32, 0xFF), ascending(32), descending(32);
  for (int i = 0; i < 32; ++i) {
    ascending[i] = static_cast<unsigned char>(i);
    descending[i] = static_cast<unsigned char>(31 - i);
  }
  EXPECT_EQ(crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  EXPECT_EQ(crc32c(ascending.data(), ascending.size()), 0x46DD794Eu);
  EXPECT_EQ(crc32c(descending.data(), descending.size()), 0x113FDB5Cu);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);
  EXPECT_EQ(crc32c_extend_portable(0, "123456789", 9), 0xE3069283u);
}

TEST(Crc32c, ExtendEqualsOneShotAndPathsAgree) {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(1000);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  for (size_t n : {0, 1, 7, 8, 9, 63, 64, 65, 999, 1000}) {
    const uint32_t whole = crc32c(data.data(), n);
    EXPECT_EQ(crc32c_extend_portable(0, data.data(), n), whole) << n;
    for (size_t split : {size_t{0}, n / 3, n}) {
      EXPECT_EQ(crc32c_extend(crc32c(data.data(), split), data.data() + split, n - split), whole)
          << n << " split " << split;
    }
  }
  // One flipped bit changes the checksum.
  const uint32_t before = crc32c(data.data(), data.size());
  data[500] ^= 0x10;
  EXPECT_NE(crc32c(data.data(), data.size()), before);
}

}  // namespace
}  // namespace k25
