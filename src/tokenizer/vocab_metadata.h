// A vocabulary as GGUF tokenizer.* metadata (the keys Tokenizer::from_gguf reads back), for
// k25-convert's Hugging Face input whose tokenizer.json becomes part of the GGUF file.
#pragma once

#include "tokenizer/tokenizer.h"

namespace k25 {

class GgufWriter;

void set_vocab_metadata(GgufWriter& writer, const Vocab& vocab);

}  // namespace k25
