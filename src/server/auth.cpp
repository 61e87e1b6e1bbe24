#include "server/auth.h"

#include <algorithm>
#include <cctype>

namespace k25 {

bool bearer_matches(std::string_view authorization, std::string_view key) {
  constexpr std::string_view kScheme = "Bearer ";
  if (authorization.size() < kScheme.size() ||
      !std::equal(kScheme.begin(), kScheme.end(), authorization.begin(), [](char a, char b) {
        return std::tolower(static_cast<unsigned char>(a)) ==
               std::tolower(static_cast<unsigned char>(b));
      })) {
    return false;
  }
  return key_matches(authorization.substr(kScheme.size()), key);
}

bool key_matches(std::string_view given, std::string_view key) {
  // Walk the whole expected key whatever the given length; the length check comes last.
  unsigned char diff = 0;
  for (size_t i = 0; i < key.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff |= g ^ static_cast<unsigned char>(key[i]);
  }
  return diff == 0 && given.size() == key.size();
}

}  // namespace k25
