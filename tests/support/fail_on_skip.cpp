// Linked into every test binary. With K25_FAIL_ON_SKIP=1 (set by .ci/run) a skipped test fails
// the run: CI cannot be green because a prerequisite (../shared, io_uring, haproxy, node, ...) is
// missing. Tests of a kernel set the CPU lacks are not skips: they are not compiled in.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// gtest calls OnTestEnd of the listeners in reverse order, so this one runs before the default
// printer writes "[  SKIPPED ]": CTest (gtest_discover_tests sets SKIP_REGULAR_EXPRESSION to that
// text) would count the test as skipped, not failed, whatever the exit status. Exiting here keeps
// the marker out of the output, so CTest sees a failure.
class FailOnSkip : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (!info.result()->Skipped()) return;
    std::fprintf(stderr, "K25_FAIL_ON_SKIP=1: %s.%s was skipped, which fails the run\n",
                 info.test_suite_name(), info.name());
    std::fflush(stdout);
    std::fflush(stderr);
    // gtest has no way for a listener to change the result; the exit status carries it.
    std::_Exit(1);
  }
};

bool fail_on_skip_requested() {
  const char* v = std::getenv("K25_FAIL_ON_SKIP");
  return v != nullptr && std::strcmp(v, "0") != 0 && *v != '\0';
}

const bool registered = [] {
  if (fail_on_skip_requested()) {
    testing::UnitTest::GetInstance()->listeners().Append(new FailOnSkip);
  }
  return true;
}();

}  // namespace
