// The tokenizer of a model file or directory, read without its weights: the server's front end
// tokenises prompts and renders chat templates with it, while the engine (behind the C API) holds
// the model's own copy.
#pragma once

#include <memory>
#include <string>

#include "tokenizer/tokenizer.h"

namespace k25 {

// Throws k25::Error as the model loader does for a missing or malformed vocabulary.
std::unique_ptr<Tokenizer> load_model_tokenizer(const std::string& model_path);

}  // namespace k25
