#include "build_paths.h"

namespace k25::build_paths {
const char* shared_dir() {
  return K25_TEST_SHARED_DIR;
}
const char* bin_dir() {
  return K25_TEST_BIN_DIR;
}
const char* source_dir() {
  return K25_TEST_SOURCE_DIR;
}
}  // namespace k25::build_paths
