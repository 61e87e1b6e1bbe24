// Test helper: the k25::Error message a parser gives for a byte image.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "util/error.h"

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

}  // namespace k25::testing
