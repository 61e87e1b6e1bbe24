// Where tests find ../shared (reference models and data) and built binaries.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <string>

namespace k25::testing {

inline std::string shared_path(const std::string& relative) {
  return std::string(K25_SHARED_DIR) + "/" + relative;
}

inline bool shared_available() {
  return std::filesystem::exists(K25_SHARED_DIR);
}

}  // namespace k25::testing

// Skips the test, loudly, when ../shared is not beside the checkout.
#define K25_REQUIRE_SHARED()                                                                       \
  do {                                                                                             \
    if (!::k25::testing::shared_available()) {                                                     \
      GTEST_SKIP() << "../shared is absent (" << K25_SHARED_DIR                                    \
                   << "): reference-data test SKIPPED; put the shared folder beside the checkout"; \
    }                                                                                              \
  } while (0)
