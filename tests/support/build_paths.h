// Where the tests find the shared test data, the built binaries and the source tree. The paths are
// compiled into one file (build_paths.cpp) instead of every test file, so the test files' compiler
// input does not depend on the checkout's folder and a compiler cache serves a clone elsewhere.
// Force-included into every test file (CMakeLists.txt); each macro is a const char*.
#pragma once

namespace k25::build_paths {
const char* shared_dir();  // ../shared beside the checkout
const char* bin_dir();     // the build's bin/
const char* source_dir();  // the checkout
}  // namespace k25::build_paths

#define K25_SHARED_DIR ::k25::build_paths::shared_dir()
#define K25_BIN_DIR ::k25::build_paths::bin_dir()
#define K25_SOURCE_DIR ::k25::build_paths::source_dir()
