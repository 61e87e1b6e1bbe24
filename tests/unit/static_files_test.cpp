// The chat page's embedded files (server/static_files.h): what a URL path finds, content types,
// and that the page references only files the binary has.
#include "server/static_files.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

namespace k25 {
namespace {

TEST(StaticFiles, RootIsIndexAndUiNamesTheFiles) {
  const StaticFile* index = find_static_file("/");
  ASSERT_NE(index, nullptr);
  EXPECT_EQ(index->name, "index.html");
  EXPECT_NE(index->content.find("<!doctype html>"), std::string_view::npos);
  for (const char* name : {"app.js", "app.css", "favicon.svg", "index.html"}) {
    const StaticFile* f = find_static_file(std::string("/ui/") + name);
    ASSERT_NE(f, nullptr) << name;
    EXPECT_EQ(f->name, name);
    EXPECT_FALSE(f->content.empty()) << name;
  }
}

TEST(StaticFiles, OnlyExactNamesMatch) {
  for (const char* path :
       {"", "/ui/", "/ui", "/app.js", "/ui/../app.js", "/ui/./app.js", "/ui//app.js", "/ui/app.js/",
        "/ui/APP.JS", "/ui/%61pp.js", "/ui/app.js?x", "/ui/app", "/ui/../../etc/passwd", "//"}) {
    EXPECT_EQ(find_static_file(path), nullptr) << path;
  }
  EXPECT_TRUE(is_static_path("/"));
  EXPECT_TRUE(is_static_path("/ui/anything"));
  EXPECT_FALSE(is_static_path("/ui"));
  EXPECT_FALSE(is_static_path("/v1/models"));
  EXPECT_FALSE(is_static_path("/metrics"));
}

TEST(StaticFiles, EveryFileHasAKnownTypeAndItsOwnQuotedEtag) {
  std::set<std::string_view> etags;
  ASSERT_FALSE(static_files().empty());
  for (const StaticFile& f : static_files()) {
    EXPECT_NE(static_content_type(f.name), "application/octet-stream") << f.name;
    ASSERT_GE(f.etag.size(), 3u);
    EXPECT_EQ(f.etag.front(), '"');
    EXPECT_EQ(f.etag.back(), '"');
    EXPECT_TRUE(etags.insert(f.etag).second) << f.name;
  }
  EXPECT_EQ(static_content_type("a.html"), "text/html; charset=utf-8");
  EXPECT_EQ(static_content_type("a.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(static_content_type("a.css"), "text/css; charset=utf-8");
  EXPECT_EQ(static_content_type("a.bin"), "application/octet-stream");
}

// A file the page asks for but the binary lacks would be a 404 in the browser; a URL outside
// the server (a CDN, a web font) would break the page without network access.
TEST(StaticFiles, PageReferencesOnlyEmbeddedFiles) {
  const std::string html(find_static_file("/")->content);
  const std::regex reference(R"re((?:src|href)="([^"]*)")re");
  int n = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), reference);
       it != std::sregex_iterator(); ++it, ++n) {
    const std::string url = (*it)[1];
    EXPECT_NE(find_static_file(url), nullptr) << url;
  }
  EXPECT_GE(n, 3);  // the script, the style sheet, the icon
  for (const StaticFile& f : static_files()) {
    if (f.name.ends_with(".svg")) continue;  // its xmlns is a name, not a fetch
    EXPECT_EQ(f.content.find("http://"), std::string_view::npos) << f.name;
    EXPECT_EQ(f.content.find("https://"), std::string_view::npos) << f.name;
  }
}

}  // namespace
}  // namespace k25
