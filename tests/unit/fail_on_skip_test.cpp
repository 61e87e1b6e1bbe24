// K25_FAIL_ON_SKIP=1 (set by .ci/run) turns a skipped test into a failed run
// (tests/support/fail_on_skip.cpp). SkipProbe.SkipsWhenForced is the documented way to force a
// skip: `K25_FORCE_SKIP=1 .ci/run` must fail. The FailOnSkip tests run this binary on the probe
// alone and check both modes, including that CTest cannot mistake the failure for a skip.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

TEST(SkipProbe, SkipsWhenForced) {
  const char* force = std::getenv("K25_FORCE_SKIP");
  if (force != nullptr && std::string(force) == "1") {
    GTEST_SKIP() << "K25_FORCE_SKIP=1 forces this skip";
  }
}

struct ProbeRun {
  int exit_code = -1;
  std::string output;
};

// Runs this test binary on SkipProbe alone, the skip forced, with K25_FAIL_ON_SKIP=`fail_on_skip`.
ProbeRun run_forced_skip(const char* fail_on_skip) {
  std::array<char, 4096> self{};
  const ssize_t n = readlink("/proc/self/exe", self.data(), self.size() - 1);
  EXPECT_GT(n, 0);
  const std::string command = std::string("K25_FORCE_SKIP=1 K25_FAIL_ON_SKIP=") + fail_on_skip +
                              " '" + self.data() + "' --gtest_filter=SkipProbe.* 2>&1";
  ProbeRun run;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return run;
  std::array<char, 4096> buffer{};
  size_t got = 0;
  while ((got = std::fread(buffer.data(), 1, buffer.size(), pipe)) > 0) {
    run.output.append(buffer.data(), got);
  }
  const int status = pclose(pipe);
  run.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return run;
}

TEST(FailOnSkip, SkippedTestFailsTheRun) {
  const ProbeRun run = run_forced_skip("1");
  EXPECT_EQ(run.exit_code, 1) << run.output;
  EXPECT_NE(run.output.find("K25_FAIL_ON_SKIP=1: SkipProbe.SkipsWhenForced was skipped"),
            std::string::npos)
      << run.output;
  // gtest_discover_tests marks a test skipped, not failed, when its output has this text.
  EXPECT_EQ(run.output.find("[  SKIPPED ]"), std::string::npos) << run.output;
}

TEST(FailOnSkip, SkippedTestOnlyReportedWhenUnset) {
  const ProbeRun run = run_forced_skip("0");
  EXPECT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("[  SKIPPED ] SkipProbe.SkipsWhenForced"), std::string::npos)
      << run.output;
}

}  // namespace
