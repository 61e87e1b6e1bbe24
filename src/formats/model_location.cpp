#include "formats/model_location.h"

#include <filesystem>

#include "core/error.h"

namespace k25 {

ModelLocation locate_model(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const std::string gguf = (fs::path(path) / "model.gguf").string();
    if (fs::exists(gguf, ec)) return {gguf, ""};
    return {"", path};
  }
  if (!fs::exists(path, ec)) fail(path, ": no such file or directory");
  return {path, ""};
}

}  // namespace k25
