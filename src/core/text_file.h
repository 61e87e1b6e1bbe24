// A whole file read into a string, with one error message shape for every caller.
#pragma once

#include <string>
#include <string_view>

namespace k25 {

// The bytes of `path`. Throws k25::Error "WHAT: cannot read 'PATH': <reason>"; `what` names the
// flag, key or purpose the file serves ("--prompt-file", "the config file").
std::string read_text_file(const std::string& path, std::string_view what);

}  // namespace k25
