// Test helpers: the k25::Error message a parser gives for a byte image, or any call gives.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/error.h"

namespace k25::testing {

// Calls Parser::parse(bytes) and returns its error message; fails the test if it succeeds.
template <typename Parser>
std::string parse_error(const std::vector<uint8_t>& bytes, const std::string& label) {
  try {
    Parser::parse(bytes.data(), bytes.size(), label);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "parse succeeded but an error was expected";
  return "";
}

// The k25::Error message `f` throws; empty when it throws none.
inline std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace k25::testing
