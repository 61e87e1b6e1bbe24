// k25-bench workloads: lengths stay in their classes' bounds, class and SLA shares follow the
// asked mix for a fixed seed, Poisson gaps have the asked mean, the same seed gives the same plan.
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "core/error.h"
#include "loadgen/workload.h"

namespace k25::loadgen {
namespace {

WorkloadOptions bimodal(int n, double scale = 1) {
  WorkloadOptions o;
  o.kind = WorkloadKind::Bimodal;
  o.requests = n;
  o.scale = scale;
  o.seed = 42;
  o.sla_mix = SlaMix::parse("20/30/50");
  return o;
}

TEST(LoadgenWorkload, BimodalLengthsWithinBounds) {
  for (double scale : {1.0, 0.25}) {
    for (const PlannedRequest& r : plan_requests(bimodal(2000, scale))) {
      if (r.length_class == "short") {
        EXPECT_GE(r.prompt_tokens, std::lround(180 * scale));
        EXPECT_LE(r.prompt_tokens, std::lround(240 * scale));
      } else {
        ASSERT_EQ(r.length_class, "long");
        EXPECT_GE(r.prompt_tokens, std::lround(10600 * scale));
        EXPECT_LE(r.prompt_tokens, std::lround(14200 * scale));
      }
    }
  }
}

TEST(LoadgenWorkload, BimodalAndSlaSharesFollowTheMix) {
  const int n = 10000;
  std::map<std::string, int> length, sla;
  for (const PlannedRequest& r : plan_requests(bimodal(n))) {
    ++length[r.length_class];
    ++sla[r.sla];
  }
  // Binomial standard deviation at n = 10000 is under 0.5%; 2% is a wide margin.
  EXPECT_NEAR(length["short"] / double(n), 0.57, 0.02);
  EXPECT_NEAR(length["long"] / double(n), 0.43, 0.02);
  EXPECT_NEAR(sla["gold"] / double(n), 0.20, 0.02);
  EXPECT_NEAR(sla["silver"] / double(n), 0.30, 0.02);
  EXPECT_NEAR(sla["bronze"] / double(n), 0.50, 0.02);
}

TEST(LoadgenWorkload, SameSeedSamePlan) {
  auto a = plan_requests(bimodal(50)), b = plan_requests(bimodal(50));
  WorkloadOptions other = bimodal(50);
  other.seed = 43;
  auto c = plan_requests(other);
  ASSERT_EQ(a.size(), b.size());
  int differing = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].prompt_tokens, b[i].prompt_tokens);
    EXPECT_EQ(a[i].sla, b[i].sla);
    EXPECT_EQ(a[i].text_offset, b[i].text_offset);
    differing += a[i].prompt_tokens != c[i].prompt_tokens;
  }
  EXPECT_GT(differing, 25);
}

TEST(LoadgenWorkload, ShortWorkloadIsOneClass) {
  WorkloadOptions o;
  o.kind = WorkloadKind::Short;
  o.requests = 500;
  o.scale = 0.5;
  for (const PlannedRequest& r : plan_requests(o)) {
    EXPECT_EQ(r.length_class, "short");
    EXPECT_GE(r.prompt_tokens, 48);
    EXPECT_LE(r.prompt_tokens, 80);
    EXPECT_EQ(r.arrival_s, 0);
  }
}

TEST(LoadgenWorkload, PoissonInterArrivalMean) {
  std::mt19937_64 rng(7);
  const double rate = 4;
  const std::vector<double> t = poisson_arrivals(20000, rate, rng);
  for (size_t i = 1; i < t.size(); ++i) ASSERT_GE(t[i], t[i - 1]);
  // Mean gap 1/rate = 0.25 s; its standard error at n = 20000 is 0.25/141 = 0.0018 s.
  EXPECT_NEAR(t.back() / t.size(), 1 / rate, 0.01);
  // Exponential gaps: about e^-1 of them exceed the mean.
  int above = 0;
  for (size_t i = 1; i < t.size(); ++i) above += (t[i] - t[i - 1]) > 1 / rate;
  EXPECT_NEAR(above / double(t.size()), std::exp(-1.0), 0.02);
}

TEST(LoadgenWorkload, RatePlansArrivals) {
  WorkloadOptions o = bimodal(100);
  o.rate = 2;
  const auto plan = plan_requests(o);
  EXPECT_GT(plan.front().arrival_s, 0);
  for (size_t i = 1; i < plan.size(); ++i) EXPECT_GT(plan[i].arrival_s, plan[i - 1].arrival_s);
}

TEST(LoadgenWorkload, Sessions) {
  WorkloadOptions o;
  o.kind = WorkloadKind::Sessions;
  o.sessions = 20;
  o.turns = 4;
  o.history_tokens = 400;
  o.turn_tokens = 40;
  const auto plan = plan_sessions(o);
  ASSERT_EQ(plan.size(), 20u);
  std::map<std::string, int> ids;
  for (const PlannedSession& s : plan) {
    ++ids[s.id];
    EXPECT_GE(s.history_tokens, 300);
    EXPECT_LE(s.history_tokens, 500);
    ASSERT_EQ(s.user_line_tokens.size(), 4u);
    for (int n : s.user_line_tokens) {
      EXPECT_GE(n, 30);
      EXPECT_LE(n, 50);
    }
  }
  EXPECT_EQ(ids.size(), 20u);
}

TEST(LoadgenWorkload, SlaMixParsing) {
  SlaMix m = SlaMix::parse("2/3/5");
  EXPECT_DOUBLE_EQ(m.gold, 0.2);
  EXPECT_DOUBLE_EQ(m.silver, 0.3);
  EXPECT_DOUBLE_EQ(m.bronze, 0.5);
  EXPECT_THROW(SlaMix::parse("20/30"), Error);
  EXPECT_THROW(SlaMix::parse("20/x/50"), Error);
  EXPECT_THROW(SlaMix::parse("0/0/0"), Error);
  EXPECT_THROW(SlaMix::parse("-1/1/1"), Error);
  EXPECT_THROW(parse_workload_kind("long"), Error);
  EXPECT_EQ(parse_workload_kind("sessions"), WorkloadKind::Sessions);
}

}  // namespace
}  // namespace k25::loadgen
