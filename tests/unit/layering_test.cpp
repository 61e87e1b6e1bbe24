// The one-way data flow of ARCHITECTURE.md, checked on the sources: a folder under src/ includes
// only folders below it (docs/architecture.md lists the order). A new include that points up, or a
// new folder not placed in the order, fails here with the file and line.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

// Lower ranks sit below; folders of one rank do not include each other.
const std::map<std::string, int> kRank = {
    {"core", 0},   {"kernels", 1}, {"client", 1}, {"formats", 2}, {"tokenizer", 3},
    {"model", 4},  {"kv", 5},      {"flash", 5},  {"engine", 6},  {"capi", 7},
    {"server", 8}, {"loadgen", 9}, {"verify", 9}};

TEST(Layering, EveryIncludePointsDown) {
  const fs::path src = fs::path(K25_SOURCE_DIR) / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  const std::regex include(R"re(^\s*#\s*include\s*"([a-z_0-9]+)/)re");
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(src)) {
    const std::string ext = entry.path().extension().string();
    if (!entry.is_regular_file() || (ext != ".h" && ext != ".cpp")) continue;
    const std::string folder = entry.path().lexically_relative(src).begin()->string();
    auto from = kRank.find(folder);
    ASSERT_NE(from, kRank.end()) << "src/" << folder << " has no place in the layer order";
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (!std::regex_search(line, m, include) || m[1] == folder) continue;
      auto to = kRank.find(m[1]);
      const std::string where = entry.path().lexically_relative(src).string() + ":" +
                                std::to_string(number) + ": " + line;
      if (to == kRank.end()) {
        ADD_FAILURE() << where << " (no folder src/" << m[1] << ")";
      } else {
        EXPECT_LT(to->second, from->second) << where << " points up or sideways";
      }
    }
  }
  EXPECT_GT(files, 100);
}

// R-API6: the server is built on the C API. Nothing in src/server or tools/k25-server.cpp includes
// the engine, the KV tiers, the loaded model or the C API's C++ side: the engine is reached
// through include/k25.h alone (server/engine_client.h). The libraries below that are not the
// engine stay usable (tokenizers and templates, grammar text, sampling parameters, Flash's
// header parsing).
TEST(Layering, TheServerReachesTheEngineThroughK25HOnly) {
  const fs::path root(K25_SOURCE_DIR);
  const std::regex forbidden(
      R"re(^\s*#\s*include\s*"((engine|kv|capi|kernels)/[^"]*|model/(model|transformer|weights)\.h)")re");
  std::vector<fs::path> files = {root / "tools" / "k25-server.cpp"};
  for (const auto& entry : fs::recursive_directory_iterator(root / "src" / "server")) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  int uses_k25_h = 0;
  for (const fs::path& file : files) {
    std::ifstream in(file);
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      EXPECT_FALSE(std::regex_search(line, m, forbidden))
          << file.lexically_relative(root).string() << ":" << number << ": " << line;
      uses_k25_h += line.find("#include \"k25.h\"") != std::string::npos;
    }
  }
  EXPECT_GE(uses_k25_h, 3);
}

}  // namespace
