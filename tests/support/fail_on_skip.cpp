// Linked into every test binary. With K25_FAIL_ON_SKIP=1 (set by .ci/run) a skipped test fails
// the run: CI cannot be green because a prerequisite (../shared, io_uring, haproxy, node, ...) is
// missing. Tests of a kernel set the CPU lacks are not skips: they are not compiled in.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

class FailOnSkip : public testing::EmptyTestEventListener {
 public:
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Skipped()) {
      skipped_.push_back(std::string(info.test_suite_name()) + "." + info.name());
    }
  }
  void OnTestProgramEnd(const testing::UnitTest&) override {
    if (skipped_.empty()) return;
    std::fprintf(stderr, "K25_FAIL_ON_SKIP=1: %zu test(s) skipped, which fails the run:\n",
                 skipped_.size());
    for (const std::string& name : skipped_) std::fprintf(stderr, "  %s\n", name.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    // gtest has no way for a listener to change the result; the exit status carries it.
    std::_Exit(1);
  }

 private:
  std::vector<std::string> skipped_;
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
