#include "model/quant_mixture.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include "core/error.h"

namespace k25 {
namespace {

struct OutTypeInfo {
  OutType type;
  const char* name;
  uint32_t file_type;
  DType base;
};

constexpr OutTypeInfo kOutTypes[] = {
    {OutType::F32, "f32", 0, DType::F32},         {OutType::F16, "f16", 1, DType::F16},
    {OutType::BF16, "bf16", 32, DType::BF16},     {OutType::Q8_0, "q8_0", 7, DType::Q8_0},
    {OutType::Q4_0, "q4_0", 2, DType::Q4_0},      {OutType::Q4_K_S, "q4_k_s", 14, DType::Q4_K},
    {OutType::Q4_K_M, "q4_k_m", 15, DType::Q4_K}, {OutType::Q5_K_S, "q5_k_s", 16, DType::Q5_K},
    {OutType::Q5_K_M, "q5_k_m", 17, DType::Q5_K}, {OutType::Q6_K, "q6_k", 18, DType::Q6_K},
};

const OutTypeInfo& info(OutType type) {
  for (const OutTypeInfo& i : kOutTypes) {
    if (i.type == type) return i;
  }
  fail("unknown outtype ", static_cast<int>(type));
}

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

// llama-quantize quantises 2-D and 3-D weights except norms and the expert router.
bool is_quantised(std::string_view name, const std::vector<int64_t>& ne) {
  size_t dims = ne.size();
  while (dims > 1 && ne[dims - 1] == 1) --dims;
  return dims >= 2 && name.ends_with("weight") && !contains(name, "_norm.weight") &&
         !contains(name, "ffn_gate_inp.weight");
}

int layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int layer = -1;
  const char* begin = name.data() + 4;
  std::from_chars(begin, name.data() + name.size(), layer);
  return layer;
}

// llama-quantize's choice of the layers that get more bits in the _M mixtures: the first and
// last eighth and every third layer in between.
bool use_more_bits(int layer, int n_layers) {
  return layer < n_layers / 8 || layer >= 7 * n_layers / 8 || (layer - n_layers / 8) % 3 == 2;
}

DType mixture_type(std::string_view name, int64_t row_length, const MixtureModel& m,
                   OutType outtype, DType type) {
  const bool eight_experts = m.n_experts == 8;
  const int layer = layer_of(name);
  if (name == "output.weight" || (m.tied_output && name == "token_embd.weight")) {
    if (row_length % dtype_info(type)->block_elements != 0) return DType::Q8_0;
    return type == DType::Q8_0 ? DType::Q8_0 : DType::Q6_K;
  }
  if (name == "token_embd.weight") return type;
  if (contains(name, "attn_v.weight")) {
    if ((outtype == OutType::Q4_K_M || outtype == OutType::Q5_K_M) &&
        use_more_bits(layer, m.n_layers)) {
      type = DType::Q6_K;
    } else if (outtype == OutType::Q4_K_S && layer < 4) {
      type = DType::Q5_K;
    }
    return eight_experts ? DType::Q8_0 : type;
  }
  if (contains(name, "attn_k.weight")) return eight_experts ? DType::Q8_0 : type;
  if (contains(name, "ffn_down")) {
    if ((outtype == OutType::Q4_K_M || outtype == OutType::Q5_K_M) &&
        use_more_bits(layer, m.n_layers)) {
      return DType::Q6_K;
    }
    if (outtype == OutType::Q4_K_S && layer < m.n_layers / 8) return DType::Q5_K;
    return type;
  }
  if (contains(name, "attn_output.weight") && eight_experts &&
      (outtype == OutType::Q4_K_S || outtype == OutType::Q4_K_M)) {
    return DType::Q5_K;
  }
  return type;
}

DType fallback(DType type, int64_t row_length) {
  const DTypeInfo* t = dtype_info(type);
  if (t == nullptr) fail("no encoder for type ", dtype_name(type));
  if (row_length % t->block_elements == 0) return type;
  DType next = DType::F16;
  if (type == DType::Q4_K) next = DType::Q5_0;
  if (type == DType::Q5_K) next = DType::Q5_1;
  if (type == DType::Q6_K) next = DType::Q8_0;
  return row_length % dtype_info(next)->block_elements == 0 ? next : DType::F16;
}

}  // namespace

OutType parse_outtype(const std::string& text) {
  std::string lower = text;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
  std::string names;
  for (const OutTypeInfo& i : kOutTypes) {
    if (lower == i.name) return i.type;
    names += names.empty() ? i.name : std::string(", ") + i.name;
  }
  fail("unknown outtype '", text, "' (use one of ", names, ")");
}

const char* outtype_name(OutType type) {
  return info(type).name;
}
uint32_t outtype_file_type(OutType type) {
  return info(type).file_type;
}
DType outtype_base_type(OutType type) {
  return info(type).base;
}

DType tensor_type_for(std::string_view name, const std::vector<int64_t>& ne,
                      const MixtureModel& model, OutType outtype) {
  if (!is_quantised(name, ne)) return DType::F32;
  const DType base = outtype_base_type(outtype);
  if (base == DType::F32 || base == DType::F16 || base == DType::BF16) return base;
  return fallback(mixture_type(name, ne[0], model, outtype, base), ne[0]);
}

}  // namespace k25
