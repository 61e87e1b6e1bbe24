#include "model/gguf_convert.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/thread_pool.h"
#include "formats/safetensors.h"
#include "kernels/quant.h"
#include "model/arch_params.h"
#include "model/convert_progress.h"
#include "model/tensor_layout.h"
#include "tokenizer/hf_tokenizer_json.h"
#include "tokenizer/vocab_metadata.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

// One output tensor and where its values come from.
struct PlannedTensor {
  std::string name;
  std::vector<int64_t> ne;
  DType type = DType::F32;
  std::vector<const TensorView*> parts;  // one, or one per stacked expert
  LayoutTensor layout;                   // row order and offset (defaults: none)
  std::vector<float> computed;           // values that no input holds (rope_freqs)
};

bool is_float_type(DType t) {
  return t == DType::F32 || t == DType::F16 || t == DType::BF16;
}

int64_t n_elements(const std::vector<int64_t>& ne) {
  int64_t n = 1;
  for (int64_t d : ne) n *= d;
  return n;
}

std::vector<int64_t> shape_of(const TensorView& t) {
  return std::vector<int64_t>(t.ne.begin(), t.ne.begin() + std::max(1, t.n_dims));
}

std::string describe_shape(const std::vector<int64_t>& ne) {
  std::string text;
  for (int64_t n : ne) text += (text.empty() ? "" : " x ") + std::to_string(n);
  return text;
}

bool is_plain_copy(const PlannedTensor& t) {
  return t.computed.empty() && t.parts.size() == 1 && t.parts[0]->type == t.type &&
         t.layout.permute_head_rows == 0 && t.layout.gguf_offset == 0.0f;
}

// Streams one tensor: a copy of its bytes, or its rows decoded to float, reordered, offset and
// encoded in the output type, a slice of rows at a time.
void produce_tensor(const PlannedTensor& t, ThreadPool& pool, const GgufWriter::Emit& emit) {
  if (is_plain_copy(t)) {
    constexpr size_t kSlice = size_t{16} << 20;
    const auto* p = static_cast<const uint8_t*>(t.parts[0]->data);
    for (size_t at = 0; at < t.parts[0]->bytes; at += kSlice) {
      emit(p + at, std::min(kSlice, t.parts[0]->bytes - at));
    }
    return;
  }
  const int64_t row_length = t.ne[0];
  const int64_t n_rows = n_elements(t.ne) / row_length;
  const size_t out_row_bytes = row_bytes(t.type, row_length);
  if (!t.computed.empty()) {
    std::vector<uint8_t> out(out_row_bytes * static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r) {
      quantize_row(t.type, t.computed.data() + r * row_length, out.data() + r * out_row_bytes,
                   row_length);
    }
    emit(out.data(), out.size());
    return;
  }
  const int64_t part_rows = n_rows / static_cast<int64_t>(t.parts.size());
  const int64_t slice_rows = std::max<int64_t>(1, (int64_t{1} << 20) / row_length);
  std::vector<float> values(static_cast<size_t>(std::min(slice_rows, n_rows) * row_length));
  std::vector<uint8_t> out(out_row_bytes * static_cast<size_t>(std::min(slice_rows, n_rows)));
  for (int64_t first = 0; first < n_rows; first += slice_rows) {
    const int64_t rows = std::min(slice_rows, n_rows - first);
    pool.run([&](int thread) {
      for (int64_t i = thread; i < rows; i += pool.size()) {
        const int64_t r = first + i;
        const TensorView& part = *t.parts[static_cast<size_t>(r / part_rows)];
        const int64_t src_row = hf_row_of(t.layout, r % part_rows);
        const size_t src_row_bytes = row_bytes(part.type, row_length);
        float* row = values.data() + i * row_length;
        dequantize_row(part.type, static_cast<const uint8_t*>(part.data) + src_row * src_row_bytes,
                       row, row_length);
        if (t.layout.gguf_offset != 0.0f) {
          for (int64_t j = 0; j < row_length; ++j) row[j] += t.layout.gguf_offset;
        }
        quantize_row(t.type, row, out.data() + i * out_row_bytes, row_length);
      }
    });
    emit(out.data(), out_row_bytes * static_cast<size_t>(rows));
  }
}

std::string outtype_label(const std::optional<OutType>& o) {
  return o ? outtype_name(*o) : "copy";
}

// ---- Hugging Face input ----

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  if (!in) fail(path.string(), ": cannot open file");
  nlohmann::json j = nlohmann::json::parse(in, nullptr, false);
  if (j.is_discarded()) fail(path.string(), ": invalid JSON");
  return j;
}

OutType outtype_of_dtype(DType t) {
  if (t == DType::F32) return OutType::F32;
  if (t == DType::BF16) return OutType::BF16;
  return OutType::F16;
}

// The tokenizer padded to the embedding's rows, as llama.cpp's converter does, so that the GGUF
// file's token count matches token_embd.
Vocab read_padded_vocab(const fs::path& dir, int n_vocab) {
  Vocab v = read_hf_tokenizer_json((dir / "tokenizer.json").string());
  if (static_cast<int>(v.tokens.size()) > n_vocab) {
    fail(dir.string(), ": tokenizer has ", v.tokens.size(), " tokens but vocab_size is ", n_vocab);
  }
  for (int i = static_cast<int>(v.tokens.size()); i < n_vocab; ++i) {
    v.tokens.push_back("[PAD" + std::to_string(i) + "]");
    if (!v.scores.empty()) v.scores.push_back(-1000.0f);
    if (!v.types.empty()) v.types.push_back(TokenType::Unused);
  }
  return v;
}

const TensorView& hf_tensor(const SafetensorsSet& st, const std::string& name,
                            std::vector<int64_t> ne, std::set<std::string>& used) {
  const TensorView& t = st.require(name);
  if (shape_of(t) != ne) {
    fail(st.dir(), ": tensor '", name, "' has shape [", describe_shape(shape_of(t)),
         "] (GGUF order), expected [", describe_shape(ne), "]");
  }
  if (!is_float_type(t.type)) fail(st.dir(), ": tensor '", name, "' is not F32, F16 or BF16");
  used.insert(name);
  return t;
}

struct HfPlan {
  std::shared_ptr<SafetensorsSet> weights;
  std::vector<PlannedTensor> tensors;
};

HfPlan plan_hf(const GgufConvertOptions& o, GgufWriter& writer, OutType* outtype) {
  const fs::path dir(o.input);
  const fs::path config_path = dir / "config.json";
  ArchParams p = arch_params_from_hf_config(read_json(config_path), config_path.string());
  HfPlan plan;
  plan.weights = SafetensorsSet::open_dir(o.input);
  const SafetensorsSet& st = *plan.weights;
  if (st.tensor("lm_head.weight") == nullptr) p.tied_output = true;  // some exports omit the flag
  const TensorView& embd = st.require("model.embed_tokens.weight");
  *outtype = o.outtype.value_or(outtype_of_dtype(embd.type));
  const MixtureModel mixture{p.n_layers, p.n_experts, p.tied_output};
  std::set<std::string> used;
  for (LayoutTensor& l : tensor_layout(p)) {
    PlannedTensor t;
    t.name = l.gguf_name;
    t.ne = l.ne;
    t.type = tensor_type_for(t.name, t.ne, mixture, *outtype);
    if (l.kind == LayoutKind::RopeFreqs) {
      t.computed = llama3_rope_factors(p);
    } else if (l.n_experts > 0) {
      const std::vector<int64_t> expert_ne = {l.ne[0], l.ne[1]};
      for (int e = 0; e < l.n_experts; ++e) {
        t.parts.push_back(&hf_tensor(st, expert_hf_name(l, e), expert_ne, used));
      }
    } else {
      t.parts.push_back(&hf_tensor(st, l.hf_name, l.ne, used));
    }
    t.layout = std::move(l);
    plan.tensors.push_back(std::move(t));
  }
  if (p.tied_output) used.insert("lm_head.weight");  // the same matrix as the embedding
  for (const TensorView* t : st.tensors()) {
    if (!used.count(t->name) && !t->name.ends_with("rotary_emb.inv_freq")) {
      fail(o.input, ": tensor '", t->name, "' has no place in the GGUF ", p.arch, " layout");
    }
  }
  set_arch_metadata(writer, p);
  writer.set_u32("general.file_type", outtype_file_type(*outtype));
  writer.set_u32("general.quantization_version", 2);
  set_vocab_metadata(writer, read_padded_vocab(dir, p.n_vocab));
  return plan;
}

// ---- GGUF input ----

std::vector<PlannedTensor> plan_gguf(const GgufConvertOptions& o, const GgufFile& in,
                                     GgufWriter& writer) {
  const bool replaces_flash =
      std::any_of(o.extra_metadata.begin(), o.extra_metadata.end(),
                  [](const auto& kv) { return kv.first.starts_with("k25.flash."); });
  for (const auto& [key, value] : in.metadata()) {
    if (o.outtype && (key == "general.file_type" || key == "general.quantization_version")) {
      continue;
    }
    if (replaces_flash && key.starts_with("k25.flash.")) continue;
    writer.set(key, value);
  }
  const std::string arch = in.get_string("general.architecture");
  MixtureModel mixture;
  mixture.n_layers = static_cast<int>(in.get_int(arch + ".block_count"));
  mixture.n_experts = static_cast<int>(in.get_int_or(arch + ".expert_count", 0));
  mixture.tied_output = in.tensor("output.weight") == nullptr;
  if (o.outtype) {
    writer.set_u32("general.file_type", outtype_file_type(*o.outtype));
    if (!is_float_type(outtype_base_type(*o.outtype))) {
      writer.set_u32("general.quantization_version", 2);
    }
  }
  std::vector<PlannedTensor> plan;
  for (const TensorView& view : in.tensors()) {
    PlannedTensor t;
    t.name = view.name;
    t.ne = shape_of(view);
    t.parts = {&view};
    t.type = o.outtype ? tensor_type_for(t.name, t.ne, mixture, *o.outtype) : view.type;
    if (t.type != view.type && !is_float_type(view.type)) {
      fail(in.path(), ": tensor '", t.name, "' is already ", dtype_name(view.type),
           "; requantising it to ", dtype_name(t.type),
           " would round it twice (convert from the F16/F32/BF16 model, or leave out --outtype "
           "to copy every tensor as it is)");
    }
    plan.push_back(std::move(t));
  }
  return plan;
}

}  // namespace

GgufConvertResult convert_to_gguf(const GgufConvertOptions& o) {
  if (o.input.empty()) fail("no input model given");
  if (o.output.empty()) fail("no output file given");
  std::error_code ec;
  if (fs::equivalent(o.input, o.output, ec))
    fail(o.output, ": the output would overwrite the input");
  std::unique_ptr<GgufFile> gguf_in;
  HfPlan hf;
  std::vector<PlannedTensor>* tensors = nullptr;
  std::unique_ptr<GgufWriter> writer;
  std::optional<OutType> outtype = o.outtype;
  std::vector<PlannedTensor> gguf_plan;
  if (fs::is_directory(o.input, ec)) {
    writer = std::make_unique<GgufWriter>();
    OutType chosen = OutType::F16;
    hf = plan_hf(o, *writer, &chosen);
    outtype = chosen;
    tensors = &hf.tensors;
  } else {
    if (!fs::exists(o.input, ec)) fail(o.input, ": no such file or directory");
    gguf_in = GgufFile::open(o.input);
    const int64_t alignment = gguf_in->get_int_or("general.alignment", 32);
    writer = std::make_unique<GgufWriter>(static_cast<uint32_t>(alignment));
    gguf_plan = plan_gguf(o, *gguf_in, *writer);
    tensors = &gguf_plan;
  }
  for (const auto& [key, value] : o.extra_metadata) writer->set(key, value);

  GgufConvertResult result;
  result.outtype = outtype_label(outtype);
  result.n_tensors = tensors->size();
  std::vector<uint64_t> offsets;
  for (const PlannedTensor& t : *tensors) {
    offsets.push_back(result.bytes);
    result.bytes += writer->declare_tensor(t.name, t.type, t.ne);
  }
  ThreadPool pool(std::max(1, o.threads));
  ConvertProgress progress(o.progress, o.progress_interactive, tensors->size(), result.bytes);
  writer->write(o.output, [&](size_t i, const GgufWriter::Emit& emit) {
    const PlannedTensor& t = (*tensors)[i];
    const std::string from = t.parts.empty() ? "computed" : dtype_name(t.parts[0]->type);
    progress.tensor(i, t.name + " " + from + " -> " + dtype_name(t.type), offsets[i]);
    produce_tensor(t, pool, emit);
    // The input is read once: its pages need not stay resident after their tensor.
    for (const TensorView* part : t.parts) release_mapped_pages(part->data, part->bytes);
  });
  progress.finish();
  return result;
}

}  // namespace k25
