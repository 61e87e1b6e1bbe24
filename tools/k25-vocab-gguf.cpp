// k25-vocab-gguf: copies a GGUF's metadata (no tensors) into a vocabulary-only GGUF, optionally
// with another tokenizer.ggml.pre. Builds test vocabularies for pre-tokenizers that have no
// fixture (e.g. GPT-2's vocabulary with pre = smollm or tekken) to compare k25's tokenisation with
// another implementation's (llama.cpp's llama-tokenize).
#include <CLI/CLI.hpp>
#include <iostream>

#include "core/error.h"
#include "formats/gguf.h"

int main(int argc, char** argv) {
  CLI::App app("k25-vocab-gguf: write a vocabulary-only copy of a GGUF's metadata");
  std::string in_path, out_path, pre;
  app.add_option("input", in_path, "GGUF to copy the metadata of")->required();
  app.add_option("output", out_path, "vocabulary-only GGUF to write")->required();
  app.add_option("--pre", pre, "tokenizer.ggml.pre of the copy (default: unchanged)");
  CLI11_PARSE(app, argc, argv);
  try {
    const auto in = k25::GgufFile::open(in_path);
    k25::GgufWriter w;
    for (const auto& [key, value] : in->metadata()) w.set(key, value);
    if (!pre.empty()) w.set_string("tokenizer.ggml.pre", pre);
    w.write(out_path);
  } catch (const k25::Error& e) {
    std::cerr << "k25-vocab-gguf: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
