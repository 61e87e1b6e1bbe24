#include "server/static_files.h"

namespace k25 {

namespace {

constexpr std::string_view kAssetPrefix = "/ui/";

}  // namespace

bool is_static_path(std::string_view url_path) {
  return url_path == "/" || url_path.starts_with(kAssetPrefix);
}

const StaticFile* find_static_file(std::string_view url_path) {
  std::string_view name;
  if (url_path == "/") {
    name = "index.html";
  } else if (url_path.starts_with(kAssetPrefix)) {
    name = url_path.substr(kAssetPrefix.size());
  } else {
    return nullptr;
  }
  for (const StaticFile& file : static_files()) {
    if (file.name == name) return &file;
  }
  return nullptr;
}

std::string_view static_content_type(std::string_view name) {
  struct Type {
    std::string_view extension;
    std::string_view content_type;
  };
  static constexpr Type kTypes[] = {
      {".html", "text/html; charset=utf-8"},
      {".css", "text/css; charset=utf-8"},
      {".js", "text/javascript; charset=utf-8"},
      {".svg", "image/svg+xml"},
      {".png", "image/png"},
      {".ico", "image/x-icon"},
  };
  for (const Type& t : kTypes) {
    if (name.ends_with(t.extension)) return t.content_type;
  }
  return "application/octet-stream";
}

}  // namespace k25
