// Errors: k25 reports failures by throwing k25::Error with a one-line, human-readable message.
// Tools catch it at the top and print "error: <message>" with a non-zero exit.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace k25 {

class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Concatenates the parts with operator<< into one message.
template <typename... Parts>
std::string concat(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

template <typename... Parts>
[[noreturn]] void fail(const Parts&... parts) {
  throw Error(concat(parts...));
}

}  // namespace k25
