// The chat page (src/server/static/): its files are compiled into the binary as byte arrays
// (cmake/embed_files.cmake writes static_files_data.cpp at build time), so k25-server serves
// them from any working directory and can read nothing else.
#pragma once

#include <span>
#include <string_view>

namespace k25 {

struct StaticFile {
  std::string_view name;     // file name in src/server/static/, e.g. "app.js"
  std::string_view content;  // the bytes
  std::string_view etag;     // quoted hash of the content, for If-None-Match
};

// Every embedded file, sorted by name (defined in the generated source).
std::span<const StaticFile> static_files();

// The URL paths of the page: "/" and everything under "/ui/".
bool is_static_path(std::string_view url_path);
// The file a URL path names: "/" is index.html, "/ui/NAME" the file NAME. Only the exact names
// of embedded files match (no decoding, no "..", no subfolders): anything else is nullptr.
const StaticFile* find_static_file(std::string_view url_path);
// Content-Type for a file name, by its extension (application/octet-stream when unknown).
std::string_view static_content_type(std::string_view name);

}  // namespace k25
