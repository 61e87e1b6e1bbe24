// R-API6 / issue 18: `cmake --install` puts libk25.so and include/k25.h under a prefix, and a C
// program built against them alone (no k25 source tree) loads a model and generates. The library
// exports the C API and nothing else.
#include <gtest/gtest.h>

#include <filesystem>
#include <regex>
#include <sstream>
#include <string>

#include "command_output.h"

namespace {

namespace fs = std::filesystem;
using k25::testing::run_capturing;

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

class InstalledLibrary : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(fs::exists(model_path())) << model_path();
    prefix_ = fs::temp_directory_path() / ("k25_install_" + std::to_string(::getpid()));
    fs::remove_all(prefix_);
    const fs::path build = fs::path(K25_BIN_DIR).parent_path();
    const auto install =
        run_capturing("cmake --install " + build.string() + " --prefix " + prefix_.string());
    ASSERT_EQ(install.status, 0) << install.out << install.err;
  }
  void TearDown() override { fs::remove_all(prefix_); }

  fs::path library() const {
    for (const char* dir : {"lib", "lib64", "lib/x86_64-linux-gnu"}) {
      if (fs::exists(prefix_ / dir / "libk25.so")) return prefix_ / dir / "libk25.so";
    }
    return {};
  }

  fs::path prefix_;
};

TEST_F(InstalledLibrary, ACProgramBuiltAgainstItGenerates) {
  ASSERT_TRUE(fs::exists(prefix_ / "include" / "k25.h"));
  const fs::path lib = library();
  ASSERT_FALSE(lib.empty()) << "no libk25.so under " << prefix_;
  const fs::path program = prefix_ / "capi_example";
  const auto compile = run_capturing(
      "cc -std=c11 -Wall -Werror -I" + (prefix_ / "include").string() + " " +
      std::string(K25_SOURCE_DIR) + "/examples/capi_example.c -o " + program.string() + " -L" +
      lib.parent_path().string() + " -lk25 -Wl,-rpath," + lib.parent_path().string());
  ASSERT_EQ(compile.status, 0) << compile.out << compile.err;
  const auto needed = run_capturing("readelf -d " + program.string());
  EXPECT_NE(needed.out.find("libk25.so."), std::string::npos) << needed.out;

  const auto run = run_capturing(program.string() + " " + model_path());
  EXPECT_EQ(run.status, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("text: , there was"), std::string::npos) << run.out;
  EXPECT_NE(run.out.find("k25_completion_tokens_total 24"), std::string::npos) << run.out;
}

TEST_F(InstalledLibrary, ExportsTheCApiOnly) {
  const fs::path lib = library();
  ASSERT_FALSE(lib.empty());
  const auto symbols = run_capturing("nm -D --defined-only " + lib.string());
  ASSERT_EQ(symbols.status, 0) << symbols.err;
  std::istringstream lines(symbols.out);
  const std::regex line_shape(R"(^[0-9a-f]+ ([A-Za-z]) (\S+)$)");
  int api_functions = 0;
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    ASSERT_TRUE(std::regex_match(line, m, line_shape)) << line;
    if (m[1] == "A") continue;  // the version node
    EXPECT_TRUE(m[2].str().starts_with("k25_")) << "exported: " << line;
    api_functions += m[1] == "T";
  }
  EXPECT_GE(api_functions, 15) << symbols.out;
  const auto soname = run_capturing("readelf -d " + lib.string());
  const std::regex soname_shape(R"(\(SONAME\).*\[libk25\.so\.([0-9]+)\])");
  std::smatch m;
  ASSERT_TRUE(std::regex_search(soname.out, m, soname_shape)) << soname.out;
  // The soname's number is the header's K25_ABI_VERSION.
  const auto header = run_capturing("grep -m1 '^#define K25_ABI_VERSION' " +
                                    (prefix_ / "include" / "k25.h").string());
  EXPECT_NE(header.out.find(" " + m[1].str()), std::string::npos) << header.out;
}

}  // namespace
