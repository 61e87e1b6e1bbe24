#include "model/mkmodel.h"

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <thread>

#include "kernels/quant.h"
#include "model/gguf.h"
#include "model/mkmodel_hf.h"
#include "model/mkmodel_random.h"
#include "model/mkmodel_shapes.h"
#include "util/error.h"
#include "util/thread_pool.h"

namespace k25 {
namespace {

// One tensor of the generated model, under both naming schemes.
struct MkTensor {
  std::string gguf_name;
  std::string hf_name;
  std::vector<int64_t> ne;  // GGUF order: ne[0] is the row length
  MkInit init;
  // llama.cpp's converter reorders the rows of Llama's q/k projections, per head, from Hugging
  // Face's rotate-half layout to interleaved pairs; the Hugging Face copy needs the inverse.
  // 0: no reordering, else the number of heads.
  int permute_heads = 0;
  int layer = -1;  // block index, -1 outside the blocks
};

std::vector<MkTensor> tensor_list(const ModelConfig& c) {
  const int64_t dim = c.dim, kv_dim = c.kv_dim(), ffn = c.ffn_dim, vocab = c.n_vocab;
  const bool llama = c.arch == Arch::Llama;
  std::vector<MkTensor> list = {
      {"token_embd.weight", "model.embed_tokens.weight", {dim, vocab}, MkInit::Matrix, 0},
      {"output_norm.weight", "model.norm.weight", {dim}, MkInit::Norm, 0},
  };
  if (!c.tied_output) {
    list.push_back({"output.weight", "lm_head.weight", {dim, vocab}, MkInit::Matrix, 0});
  }
  for (int layer = 0; layer < c.n_layers; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    const std::string hf = "model.layers." + std::to_string(layer) + ".";
    auto add = [&](const char* gguf, const char* hf_name, std::vector<int64_t> ne, MkInit init,
                   int permute_heads = 0) {
      list.push_back({blk + gguf, hf + hf_name, std::move(ne), init, permute_heads, layer});
    };
    add("attn_norm.weight", "input_layernorm.weight", {dim}, MkInit::Norm);
    add("attn_q.weight", "self_attn.q_proj.weight", {dim, dim}, MkInit::Matrix,
        llama ? c.n_heads : 0);
    add("attn_k.weight", "self_attn.k_proj.weight", {dim, kv_dim}, MkInit::Matrix,
        llama ? c.n_kv_heads : 0);
    add("attn_v.weight", "self_attn.v_proj.weight", {dim, kv_dim}, MkInit::Matrix);
    if (c.qkv_bias) {
      add("attn_q.bias", "self_attn.q_proj.bias", {dim}, MkInit::Bias);
      add("attn_k.bias", "self_attn.k_proj.bias", {kv_dim}, MkInit::Bias);
      add("attn_v.bias", "self_attn.v_proj.bias", {kv_dim}, MkInit::Bias);
    }
    add("attn_output.weight", "self_attn.o_proj.weight", {dim, dim}, MkInit::Matrix);
    add("ffn_norm.weight", "post_attention_layernorm.weight", {dim}, MkInit::Norm);
    add("ffn_gate.weight", "mlp.gate_proj.weight", {dim, ffn}, MkInit::Matrix);
    add("ffn_up.weight", "mlp.up_proj.weight", {dim, ffn}, MkInit::Matrix);
    add("ffn_down.weight", "mlp.down_proj.weight", {ffn, dim}, MkInit::Matrix);
  }
  return list;
}

// llama.cpp's LLAMA_FTYPE values.
uint32_t file_type(DType dtype) {
  switch (dtype) {
    case DType::F32:
      return 0;
    case DType::F16:
      return 1;
    case DType::Q4_0:
      return 2;
    case DType::Q8_0:
      return 7;
    default:
      fail("no llama.cpp file type for dtype ", dtype_name(dtype));
  }
}

void set_model_metadata(GgufWriter& writer, const ModelConfig& c, DType dtype) {
  const std::string arch = arch_name(c.arch);
  writer.set_string("general.architecture", arch);
  writer.set_string("general.name", c.name);
  writer.set_u32("general.file_type", file_type(dtype));
  if (dtype == DType::Q8_0 || dtype == DType::Q4_0) {
    writer.set_u32("general.quantization_version", 2);
  }
  writer.set_u32(arch + ".vocab_size", static_cast<uint32_t>(c.n_vocab));
  writer.set_u32(arch + ".context_length", static_cast<uint32_t>(c.context_length));
  writer.set_u32(arch + ".embedding_length", static_cast<uint32_t>(c.dim));
  writer.set_u32(arch + ".block_count", static_cast<uint32_t>(c.n_layers));
  writer.set_u32(arch + ".feed_forward_length", static_cast<uint32_t>(c.ffn_dim));
  writer.set_u32(arch + ".attention.head_count", static_cast<uint32_t>(c.n_heads));
  writer.set_u32(arch + ".attention.head_count_kv", static_cast<uint32_t>(c.n_kv_heads));
  writer.set_u32(arch + ".rope.dimension_count", static_cast<uint32_t>(c.rope_dim));
  writer.set_f32(arch + ".rope.freq_base", c.rope_theta);
  writer.set_f32(arch + ".attention.layer_norm_rms_epsilon", c.rms_eps);
}

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

// Float16 copy in Hugging Face row order (see MkTensor::permute_heads).
std::vector<uint16_t> hf_f16_rows(const MkTensor& t, const std::vector<float>& values) {
  const int64_t row_length = t.ne[0];
  const int64_t n_rows = static_cast<int64_t>(values.size()) / row_length;
  std::vector<uint16_t> out(values.size());
  const int64_t head_rows = t.permute_heads > 0 ? n_rows / t.permute_heads : n_rows;
  const int64_t half = head_rows / 2;
  for (int64_t r = 0; r < n_rows; ++r) {
    int64_t hf_row = r;
    if (t.permute_heads > 0) {
      // Within a head, GGUF row 2*i + j holds Hugging Face row j*half + i.
      const int64_t head = r / head_rows, within = r % head_rows;
      hf_row = head * head_rows + (within % 2) * half + within / 2;
    }
    quantize_row(DType::F16, values.data() + r * row_length, out.data() + hf_row * row_length,
                 row_length);
  }
  return out;
}

std::string describe_shape(const std::vector<int64_t>& ne) {
  std::string text;
  for (int64_t n : ne) text += (text.empty() ? "" : " x ") + std::to_string(n);
  return text;
}

}  // namespace

DType parse_mkmodel_dtype(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  if (lower == "f32") return DType::F32;
  if (lower == "f16") return DType::F16;
  if (lower == "q8_0") return DType::Q8_0;
  if (lower == "q4_0") return DType::Q4_0;
  fail("unsupported --dtype '", text, "' (use f16, q8_0, q4_0 or f32)");
}

void make_model(const MkModelOptions& options) {
  const auto started = std::chrono::steady_clock::now();
  const MkShape& shape = find_mkmodel_shape(options.shape);
  if (options.dtype != DType::F32 && options.dtype != DType::F16 && options.dtype != DType::Q8_0 &&
      options.dtype != DType::Q4_0) {
    fail("k25-mkmodel cannot write dtype ", dtype_name(options.dtype));
  }
  if (!options.hf_dir.empty() && options.dtype != DType::F16) {
    fail("--hf-dir needs --dtype f16: Hugging Face safetensors have no ", dtype_name(options.dtype),
         " tensors");
  }
  if (options.out_path.empty()) fail("no output file given (-o OUT.gguf)");

  const std::filesystem::path vocab_path =
      std::filesystem::path(options.vocab_dir) / shape.vocab_file;
  if (!std::filesystem::is_regular_file(vocab_path)) {
    fail("vocabulary file ", vocab_path.string(), " not found (shape ", shape.name,
         " needs it; pass --vocab-dir DIR holding llama.cpp's ggml-vocab-*.gguf files)");
  }
  const std::unique_ptr<GgufFile> vocab = GgufFile::open(vocab_path.string());
  ModelConfig config = shape.config;
  config.n_vocab = static_cast<int>(vocab->get_string_array("tokenizer.ggml.tokens").size());

  ThreadPool pool(static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 16u)));
  GgufWriter writer;
  set_model_metadata(writer, config, options.dtype);
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
  log(shape.name + " (" + std::to_string(config.n_vocab) + " tokens from " +
      vocab_path.filename().string() + "), " + dtype_name(options.dtype) + ", seed " +
      std::to_string(options.seed));

  int logged_layer = -1;
  for (const MkTensor& t : tensor_list(config)) {
    if (t.layer < 0) {
      log(t.gguf_name + " [" + describe_shape(t.ne) + "]");
    } else if (t.layer != logged_layer) {
      log("layer " + std::to_string(t.layer + 1) + "/" + std::to_string(config.n_layers));
      logged_layer = t.layer;
    }
    int64_t n = 1;
    for (int64_t d : t.ne) n *= d;
    const std::vector<float> values =
        mkmodel_random_values(options.seed, t.gguf_name, t.init, n, pool);
    const DType type = t.init == MkInit::Matrix ? options.dtype : DType::F32;
    const std::vector<uint8_t> encoded = encode(type, values, t.ne[0], pool);
    writer.add_tensor(t.gguf_name, type, t.ne, encoded.data(), encoded.size());
    if (hf) {
      std::vector<int64_t> hf_shape(t.ne.rbegin(), t.ne.rend());
      hf->add_f16(t.hf_name, std::move(hf_shape), hf_f16_rows(t, values));
    }
  }

  log("writing " + options.out_path);
  writer.write(options.out_path);
  if (hf) {
    log("writing Hugging Face directory " + options.hf_dir);
    hf->write(config, *vocab);
  }
  log("done");
}

}  // namespace k25
