#include "flash/request_hints.h"

#include <gtest/gtest.h>

namespace k25 {
namespace {

TEST(RequestHints, LatencyClassesRoundTripAndNothingElseParses) {
  for (LatencySla sla : {LatencySla::Gold, LatencySla::Silver, LatencySla::Bronze}) {
    EXPECT_EQ(parse_latency_sla(sla_name(sla)), sla);
  }
  for (const char* bad : {"", "Gold", "gold ", "platinum", "silverx"}) {
    EXPECT_FALSE(parse_latency_sla(bad).has_value()) << bad;
  }
  EXPECT_GT(sla_priority(LatencySla::Gold), sla_priority(LatencySla::Silver));
  EXPECT_GT(sla_priority(LatencySla::Silver), sla_priority(LatencySla::Bronze));
}

TEST(RequestHints, TheDefaultsAreTheDefaultDomainAndSilver) {
  EXPECT_EQ(FlashHints{}.domain, "default");
  EXPECT_EQ(FlashHints{}.sla, LatencySla::Silver);
}

}  // namespace
}  // namespace k25
