// k25-bench statistics: percentile interpolation, TPOT, goodput and per-class grouping.
#include <gtest/gtest.h>

#include <cmath>

#include "loadgen/stats.h"

namespace k25::loadgen {
namespace {

TEST(LoadgenStats, PercentileInterpolatesBetweenRanks) {
  EXPECT_TRUE(std::isnan(percentile({}, 0.5)));
  EXPECT_DOUBLE_EQ(percentile({7}, 0.99), 7);
  EXPECT_DOUBLE_EQ(percentile({4, 1, 3, 2}, 0.5), 2.5);  // order does not matter
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 0.0), 1);
  EXPECT_DOUBLE_EQ(percentile({1, 2, 3, 4}, 1.0), 4);
  // NumPy: np.percentile(range(1, 101), 99) == 99.01
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  EXPECT_NEAR(percentile(hundred, 0.99), 99.01, 1e-9);
  EXPECT_NEAR(percentile(hundred, 0.5), 50.5, 1e-9);
}

TEST(LoadgenStats, Summary) {
  Summary s = summarize({10, 20, 30, 40});
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.mean, 25);
  EXPECT_DOUBLE_EQ(s.p50, 25);
  EXPECT_DOUBLE_EQ(s.min, 10);
  EXPECT_DOUBLE_EQ(s.max, 40);
  EXPECT_EQ(summarize({}).count, 0u);
}

RequestRecord ok_record(int id, std::string sla, double ttft, double e2e, int tokens) {
  RequestRecord r;
  r.id = id;
  r.tags = {{"sla", std::move(sla)}};
  r.ok = true;
  r.http_status = 200;
  r.ttft_ms = ttft;
  r.e2e_ms = e2e;
  r.output_tokens = tokens;
  return r;
}

TEST(LoadgenStats, Tpot) {
  RequestRecord r = ok_record(0, "gold", 100, 1000, 10);
  ASSERT_TRUE(r.tpot_ms());
  EXPECT_DOUBLE_EQ(*r.tpot_ms(), 100);  // (1000 - 100) / 9
  r.output_tokens = 1;
  EXPECT_FALSE(r.tpot_ms());
}

TEST(LoadgenStats, ReportGroupsAndGoodput) {
  std::vector<RequestRecord> records = {ok_record(0, "gold", 50, 500, 10),
                                        ok_record(1, "gold", 150, 600, 10),
                                        ok_record(2, "bronze", 80, 2000, 10)};
  records[1].start_ms = 1000;  // the run spans 0 .. 1600 ms
  records[1].itl_ms = {5, 15};
  RequestRecord failed;
  failed.id = 3;
  failed.tags = {{"sla", "bronze"}};
  failed.http_status = 429;
  failed.rejected_429 = 1;
  failed.error = "HTTP 429: queue full";
  records.push_back(failed);

  Slo slo{100.0, 100.0};  // ttft <= 100 ms and tpot <= 100 ms
  Report r = build_report(records, slo);
  EXPECT_EQ(r.overall.requests, 4u);
  EXPECT_EQ(r.overall.succeeded, 3u);
  EXPECT_EQ(r.overall.failed, 1u);
  EXPECT_EQ(r.overall.rejected_429, 1u);
  // #0: ttft 50, tpot 50 -> good; #1: ttft 150 -> not; #2: tpot (2000-80)/9 = 213 -> not.
  EXPECT_EQ(r.overall.goodput_requests, 1u);
  EXPECT_EQ(r.overall.output_tokens, 30);
  EXPECT_DOUBLE_EQ(r.duration_s, 2.0);
  EXPECT_DOUBLE_EQ(r.req_per_s, 1.5);
  EXPECT_DOUBLE_EQ(r.output_tok_per_s, 15);
  EXPECT_EQ(r.overall.itl.count, 2u);
  EXPECT_DOUBLE_EQ(r.overall.itl.mean, 10);
  ASSERT_EQ(r.by_tag.at("sla").size(), 2u);
  EXPECT_EQ(r.by_tag.at("sla").at("gold").succeeded, 2u);
  EXPECT_DOUBLE_EQ(r.by_tag.at("sla").at("gold").ttft.mean, 100);
  EXPECT_EQ(r.by_tag.at("sla").at("bronze").failed, 1u);
  EXPECT_EQ(r.errors.at("HTTP 429: queue full"), 1);
  nlohmann::json j = to_json(r);
  EXPECT_EQ(j["by_class"]["sla"]["gold"]["succeeded"], 2);
  EXPECT_EQ(j["overall"]["ttft_ms"]["count"], 3);
}

TEST(LoadgenStats, CancelledAreNotErrors) {
  RequestRecord r;
  r.cancelled = true;
  r.error = "stream: Operation canceled";
  Report report = build_report({r}, Slo{});
  EXPECT_EQ(report.overall.cancelled, 1u);
  EXPECT_EQ(report.overall.failed, 0u);
  EXPECT_TRUE(report.errors.empty());
}

}  // namespace
}  // namespace k25::loadgen
