// The chat page (src/server/static/) served by the real k25-server: its files from the binary
// with their types and cache headers, nothing else under /ui/, and the page itself in headless
// Chromium (tests/integration/clients/chat_page.mjs) against stories260K.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>

#include "node_clients.h"
#include "server_process.h"

namespace k25::testing {
namespace {

constexpr const char* kApiKey = "sk-chat-page";
constexpr const char* kChromium = "/usr/bin/chromium";

std::string model_path() {
  return std::string(K25_SHARED_DIR) + "/models/stories260K.gguf";
}

class ChatPage : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!std::filesystem::exists(model_path())) return;
    // An API key: the page is public, its API calls need the key the browser test types in.
    // A 20 ms step delay makes the stream of the tiny model slow enough to watch it grow.
    server_ = new ServerProcess({"--config", std::string(K25_SOURCE_DIR) + "/k25_config.yaml",
                                 "--model", model_path(), "--threads", "1", "--api-key", kApiKey,
                                 "--debug-step-delay-ms", "20"});
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  void SetUp() override {
    ASSERT_TRUE(server_) << model_path() << " is missing: put ../shared beside the checkout";
  }
  HttpResult get(const std::string& target, const std::map<std::string, std::string>& h = {}) {
    return http_call(server_->port(), "GET", target, "", h);
  }

  static ServerProcess* server_;
};
ServerProcess* ChatPage::server_ = nullptr;

TEST_F(ChatPage, ServesTheEmbeddedFilesWithTypesAndCacheHeaders) {
  HttpResult index = get("/");  // no Authorization: the page itself is public
  ASSERT_EQ(index.status, 200) << index.body;
  EXPECT_EQ(index.headers["content-type"], "text/html; charset=utf-8");
  EXPECT_NE(index.body.find("<script src=\"/ui/app.js\""), std::string::npos);
  EXPECT_EQ(index.headers["cache-control"], "no-cache");
  EXPECT_EQ(index.headers["x-content-type-options"], "nosniff");
  EXPECT_EQ(index.headers["content-security-policy"].rfind("default-src 'self'", 0), 0u);
  const std::map<std::string, std::string> types = {
      {"/ui/app.js", "text/javascript; charset=utf-8"},
      {"/ui/app.css", "text/css; charset=utf-8"},
      {"/ui/favicon.svg", "image/svg+xml"}};
  for (const auto& [path, type] : types) {
    HttpResult r = get(path);
    EXPECT_EQ(r.status, 200) << path;
    EXPECT_EQ(r.headers["content-type"], type) << path;
    EXPECT_FALSE(r.body.empty()) << path;
  }
  // The same ETag again: 304 without a body.
  const std::string etag = index.headers["etag"];
  ASSERT_GE(etag.size(), 3u);
  EXPECT_EQ(etag.front(), '"');
  HttpResult again = get("/", {{"If-None-Match", etag}});
  EXPECT_EQ(again.status, 304);
  EXPECT_TRUE(again.body.empty());
  EXPECT_EQ(get("/", {{"If-None-Match", "\"other\""}}).status, 200);
}

TEST_F(ChatPage, ServesNothingButTheEmbeddedFiles) {
  for (const char* path :
       {"/ui/nope.js", "/ui/", "/ui", "/ui/../CMakeLists.txt", "/ui/..%2fCMakeLists.txt",
        "/ui/%2e%2e/CMakeLists.txt", "/ui//app.js", "/ui/static/app.js", "/ui/app.js/",
        "/ui/APP.JS", "/ui/app.js%00", "/ui/../../../../etc/passwd", "/index.html"}) {
    HttpResult r = get(path, {{"Authorization", std::string("Bearer ") + kApiKey}});
    EXPECT_EQ(r.status, 404) << path << ": " << r.body;
  }
  EXPECT_EQ(http_call(server_->port(), "POST", "/", "{}").status, 405);
  // The API behind the page still wants the key.
  EXPECT_EQ(get("/v1/models").status, 401);
  EXPECT_EQ(get("/metrics").status, 401);
}

TEST_F(ChatPage, WorksInHeadlessChromium) {
  ASSERT_TRUE(std::filesystem::exists(kChromium))
      << kChromium << " is missing (scripts/setup.sh installs Debian's chromium)";
  const std::string missing = missing_node_package("playwright-core");
  ASSERT_TRUE(missing.empty()) << missing;
  const std::filesystem::path dir =
      std::filesystem::path(::testing::TempDir()) / ("k25_chat_page_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string screenshot = (dir / "chat_page.png").string();
  std::filesystem::remove(screenshot);
  const std::string url = "http://127.0.0.1:" + std::to_string(server_->port()) + "/";
  EXPECT_CLIENT_PASSES("chat_page.mjs", url + " " + screenshot + " " + kApiKey);
  ASSERT_TRUE(std::filesystem::exists(screenshot));
  EXPECT_GT(std::filesystem::file_size(screenshot), 10'000u);
  std::cout << "screenshot: " << screenshot << "\n";
}

}  // namespace
}  // namespace k25::testing
