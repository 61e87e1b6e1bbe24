#include "model/mkmodel.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "core/error.h"
#include "core/thread_pool.h"
#include "formats/gguf.h"
#include "kernels/quant.h"
#include "model/mkmodel_hf.h"
#include "model/mkmodel_random.h"
#include "model/mkmodel_shapes.h"
#include "model/tensor_layout.h"

namespace k25 {
namespace {

// The vocabulary file's tokenizer.* keys are copied verbatim, whatever they are.
void copy_tokenizer_metadata(GgufWriter& writer, const GgufFile& vocab) {
  for (const auto& [key, value] : vocab.metadata()) {
    if (key.starts_with("tokenizer.")) writer.set(key, value);
  }
}

std::vector<uint8_t> encode(DType dtype, const std::vector<float>& values, int64_t row_length,
                            ThreadPool& pool) {
  const int64_t n_rows = static_cast<int64_t>(values.size()) / row_length;
  const size_t bytes_per_row = row_bytes(dtype, row_length);
  std::vector<uint8_t> out(bytes_per_row * static_cast<size_t>(n_rows));
  pool.run([&](int thread) {
    for (int64_t r = thread; r < n_rows; r += pool.size()) {
      quantize_row(dtype, values.data() + r * row_length, out.data() + r * bytes_per_row,
                   row_length);
    }
  });
  return out;
}

MkInit init_of(LayoutKind kind) {
  if (kind == LayoutKind::Norm) return MkInit::Norm;
  if (kind == LayoutKind::Bias) return MkInit::Bias;
  return MkInit::Matrix;
}

// The float16 Hugging Face copy of one tensor (one per expert of a stacked one), in Hugging
// Face's row order and without the GGUF offset (see LayoutTensor).
void add_hf_copy(MkHfWriter& hf, const LayoutTensor& t, const std::vector<float>& values) {
  const int64_t row_length = t.ne[0];
  const int64_t n_parts = t.n_experts > 0 ? t.n_experts : 1;
  const int64_t part_rows = static_cast<int64_t>(values.size()) / row_length / n_parts;
  std::vector<float> row(static_cast<size_t>(row_length));
  for (int64_t part = 0; part < n_parts; ++part) {
    std::vector<uint16_t> out(static_cast<size_t>(part_rows * row_length));
    for (int64_t r = 0; r < part_rows; ++r) {
      const float* src = values.data() + (part * part_rows + r) * row_length;
      for (int64_t j = 0; j < row_length; ++j) row[j] = src[j] - t.gguf_offset;
      quantize_row(DType::F16, row.data(), out.data() + hf_row_of(t, r) * row_length, row_length);
    }
    std::vector<int64_t> shape = {part_rows, row_length};
    if (t.ne.size() == 1) shape = {row_length};
    hf.add_f16(t.n_experts > 0 ? expert_hf_name(t, static_cast<int>(part)) : t.hf_name,
               std::move(shape), std::move(out));
  }
}

std::string describe_shape(const std::vector<int64_t>& ne) {
  std::string text;
  for (int64_t n : ne) text += (text.empty() ? "" : " x ") + std::to_string(n);
  return text;
}

}  // namespace

OutType parse_mkmodel_dtype(const std::string& text) {
  return parse_outtype(text);
}

void make_model(const MkModelOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const MkShape& shape = find_mkmodel_shape(options.shape);
  if (!options.hf_dir.empty() && options.dtype != OutType::F16) {
    fail("--hf-dir needs --dtype f16: Hugging Face safetensors have no ",
         outtype_name(options.dtype), " tensors");
  }
  if (options.out_path.empty()) fail("no output file given (-o OUT.gguf)");

  const std::filesystem::path vocab_path =
      std::filesystem::path(options.vocab_dir) / shape.vocab_file;
  if (!std::filesystem::is_regular_file(vocab_path)) {
    fail("vocabulary file ", vocab_path.string(), " not found (shape ", shape.name,
         " needs it; pass --vocab-dir DIR holding llama.cpp's ggml-vocab-*.gguf files)");
  }
  const std::unique_ptr<GgufFile> vocab = GgufFile::open(vocab_path.string());
  ArchParams params = shape.params;
  if (options.context_length < 0) fail("--context-length must be positive");
  if (options.context_length > 0) params.context_length = options.context_length;
  params.n_vocab = static_cast<int>(vocab->get_string_array("tokenizer.ggml.tokens").size());

  ThreadPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u)));
  GgufWriter writer;
  set_arch_metadata(writer, params);
  writer.set_u32("general.file_type", outtype_file_type(options.dtype));
  const DType base = outtype_base_type(options.dtype);
  if (base != DType::F32 && base != DType::F16 && base != DType::BF16) {
    writer.set_u32("general.quantization_version", 2);
  }
  copy_tokenizer_metadata(writer, *vocab);
  std::optional<MkHfWriter> hf;
  if (!options.hf_dir.empty()) hf.emplace(options.hf_dir, options.hf_sharded);

  auto log = [&](const std::string& line) {
    if (options.progress == nullptr) return;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    char stamp[32];
    std::snprintf(stamp, sizeof stamp, "[%6.1fs] ", seconds);
    *options.progress << "k25-mkmodel: " << stamp << line << std::endl;
  };
  log(shape.name + " (" + std::to_string(params.n_vocab) + " tokens from " +
      vocab_path.filename().string() + "), " + outtype_name(options.dtype) + ", seed " +
      std::to_string(options.seed));

  const MixtureModel mixture{params.n_layers, params.n_experts, params.tied_output};
  int logged_layer = -1;
  for (const LayoutTensor& t : tensor_layout(params)) {
    if (t.layer < 0) {
      log(t.gguf_name + " [" + describe_shape(t.ne) + "]");
    } else if (t.layer != logged_layer) {
      log("layer " + std::to_string(t.layer + 1) + "/" + std::to_string(params.n_layers));
      logged_layer = t.layer;
    }
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    const std::vector<float> values =
        t.kind == LayoutKind::RopeFreqs
            ? llama3_rope_factors(params)
            : mkmodel_random_values(options.seed, t.gguf_name, init_of(t.kind), n, pool);
    const DType type = tensor_type_for(t.gguf_name, t.ne, mixture, options.dtype);
    const std::vector<uint8_t> encoded = encode(type, values, t.ne[0], pool);
    writer.add_tensor(t.gguf_name, type, t.ne, encoded.data(), encoded.size());
    if (hf && t.kind != LayoutKind::RopeFreqs) add_hf_copy(*hf, t, values);
  }

  log("writing " + options.out_path);
  writer.write(options.out_path);
  if (hf) {
    log("writing Hugging Face directory " + options.hf_dir);
    hf->write(params, *vocab);
  }
  log("done");
}

}  // namespace k25
