// k25-mkmodel: writes a model of a real shape with random weights, as GGUF and optionally as a
// Hugging Face directory, for tests and benchmarks that should not ship multi-GB files.
#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>
#include <string_view>

#include "core/error.h"
#include "model/mkmodel.h"
#include "model/mkmodel_shapes.h"

namespace {

constexpr const char* kUsage =
    "usage: k25-mkmodel --shape NAME --dtype TYPE -o OUT.gguf [--seed S] [--context-length N]\n"
    "                   [--hf-dir DIR [--sharded]] [--vocab-dir DIR]\n"
    "       k25-mkmodel --list\n"
    "  --dtype TYPE    f32, f16, bf16, q8_0, q4_0, q4_k_s, q4_k_m, q5_k_s, q5_k_m or q6_k (the\n"
    "                  tensor mixture llama-quantize writes for that type)\n"
    "  --context-length N  the model's context length instead of the shape's (1 to 1048576)\n"
    "  --hf-dir DIR    also write config.json, safetensors and tokenizer.json (f16 only)\n"
    "  --sharded       split the safetensors into two shards with an index\n"
    "  --vocab-dir DIR llama.cpp vocabulary GGUFs (default ../shared/tokenizers/llamacpp-vocab)\n";

void list_shapes() {
  for (const k25::MkShape& shape : k25::mkmodel_shapes()) {
    std::cout << shape.name << "\t" << shape.description << " (vocabulary " << shape.vocab_file
              << ")\n";
  }
}

int parse_context_length(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const long n = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || n < 1 || n > (1L << 20)) {
    k25::fail("--context-length needs an integer from 1 to 1048576, got '", text, "'");
  }
  return static_cast<int>(n);
}

uint64_t parse_seed(const std::string& text) {
  char* end = nullptr;
  errno = 0;
  const unsigned long long seed = std::strtoull(text.c_str(), &end, 10);
  if (text.empty() || *end != '\0' || errno != 0 || text[0] == '-') {
    k25::fail("--seed needs a non-negative integer, got '", text, "'");
  }
  return seed;
}

int run(int argc, char** argv) {
  k25::MkModelOptions options;
  options.progress = &std::cerr;
  bool have_dtype = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) k25::fail(arg, " needs a value");
      return argv[++i];
    };
    if (arg == "--list") {
      list_shapes();
      return 0;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      return 0;
    } else if (arg == "--shape") {
      options.shape = value();
    } else if (arg == "--dtype") {
      options.dtype = k25::parse_mkmodel_dtype(value());
      have_dtype = true;
    } else if (arg == "-o" || arg == "--output") {
      options.out_path = value();
    } else if (arg == "--hf-dir") {
      options.hf_dir = value();
    } else if (arg == "--sharded") {
      options.hf_sharded = true;
    } else if (arg == "--seed") {
      options.seed = parse_seed(value());
    } else if (arg == "--context-length") {
      options.context_length = parse_context_length(value());
    } else if (arg == "--vocab-dir") {
      options.vocab_dir = value();
    } else {
      k25::fail("unknown argument '", arg, "' (see --help)");
    }
  }
  if (options.shape.empty()) k25::fail("--shape is required (see --list)");
  if (!have_dtype) k25::fail("--dtype is required (f16, q8_0, q4_0, q4_k_m, ...; see --help)");
  if (options.hf_sharded && options.hf_dir.empty()) k25::fail("--sharded needs --hf-dir");
  k25::make_model(options);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
}
