// k25-bench helpers: /proc/PID/status parsing and sampling, the URL parser, the progress line.
#include <gtest/gtest.h>
#include <unistd.h>

#include "core/error.h"
#include "loadgen/progress.h"
#include "loadgen/rss_sampler.h"
#include "loadgen/sse_client.h"

namespace k25::loadgen {
namespace {

TEST(LoadgenRss, ParsesProcStatus) {
  const std::string status =
      "Name:\tk25-server\nVmPeak:\t  999999 kB\nVmHWM:\t   204800 kB\nVmRSS:\t  102400 kB\n"
      "Threads:\t4\nVmBad:\t12 MB\n";
  EXPECT_EQ(proc_status_bytes(status, "VmRSS"), 102400LL * 1024);
  EXPECT_EQ(proc_status_bytes(status, "VmHWM"), 204800LL * 1024);
  EXPECT_FALSE(proc_status_bytes(status, "VmSwap"));
  EXPECT_FALSE(proc_status_bytes(status, "Threads"));  // no kB unit
  EXPECT_FALSE(proc_status_bytes(status, "VmBad"));
  EXPECT_FALSE(proc_status_bytes(status, "Vm"));  // a prefix is not a field
}

TEST(LoadgenRss, SamplesThisProcess) {
  RssSampler sampler(getpid(), std::chrono::milliseconds(5));
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  sampler.stop();
  EXPECT_GT(sampler.peak_rss_bytes(), 0);
  EXPECT_GE(sampler.peak_rss_bytes(), sampler.hwm_bytes());
  EXPECT_FALSE(sampler.samples().empty());
  EXPECT_THROW(RssSampler(-5), Error);
}

TEST(LoadgenProgress, Text) {
  ProgressState s{3, 8, 4, 1, 2.5};
  EXPECT_EQ(progress_text(s, 8), "[###.....] 3/8 done, 4 running, 1 errors, 2.5 s");
  EXPECT_EQ(progress_text(s, 0), "3/8 done, 4 running, 1 errors, 2.5 s");
  ProgressState empty{0, 0, 0, 0, 0};
  EXPECT_EQ(progress_text(empty, 4), "[....] 0/0 done, 0 running, 0 errors, 0.0 s");
}

}  // namespace
}  // namespace k25::loadgen
