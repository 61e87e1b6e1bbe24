#include "model/tensor_layout.h"

namespace k25 {

std::vector<LayoutTensor> tensor_layout(const ArchParams& p) {
  const int64_t dim = p.dim, q_dim = int64_t{p.n_heads} * p.head_dim,
                kv_dim = int64_t{p.n_kv_heads} * p.head_dim, ffn = p.ffn_dim, vocab = p.n_vocab;
  const bool gemma = p.is_gemma3();
  const float norm_offset = gemma ? 1.0f : 0.0f;
  std::vector<LayoutTensor> list;
  if (p.rope_scaling == "llama3") {
    list.push_back({"rope_freqs.weight", "", {p.head_dim / 2}, LayoutKind::RopeFreqs});
  }
  list.push_back({"token_embd.weight", "model.embed_tokens.weight", {dim, vocab}});
  for (int layer = 0; layer < p.n_layers; ++layer) {
    const std::string blk = "blk." + std::to_string(layer) + ".";
    const std::string hf = "model.layers." + std::to_string(layer) + ".";
    auto add = [&](const char* gguf, const std::string& hf_name, std::vector<int64_t> ne,
                   LayoutKind kind, int permute_head_rows = 0, int n_experts = 0) {
      const float offset = kind == LayoutKind::Norm ? norm_offset : 0.0f;
      list.push_back({blk + gguf, hf + hf_name, std::move(ne), kind, permute_head_rows, offset,
                      n_experts, layer});
    };
    const int permute = p.is_llama() ? p.head_dim : 0;
    add("attn_norm.weight", "input_layernorm.weight", {dim}, LayoutKind::Norm);
    add("attn_q.weight", "self_attn.q_proj.weight", {dim, q_dim}, LayoutKind::Matrix, permute);
    add("attn_k.weight", "self_attn.k_proj.weight", {dim, kv_dim}, LayoutKind::Matrix, permute);
    add("attn_v.weight", "self_attn.v_proj.weight", {dim, kv_dim}, LayoutKind::Matrix);
    if (p.qkv_bias) {
      add("attn_q.bias", "self_attn.q_proj.bias", {q_dim}, LayoutKind::Bias);
      add("attn_k.bias", "self_attn.k_proj.bias", {kv_dim}, LayoutKind::Bias);
      add("attn_v.bias", "self_attn.v_proj.bias", {kv_dim}, LayoutKind::Bias);
    }
    if (p.qk_norm) {
      add("attn_q_norm.weight", "self_attn.q_norm.weight", {p.head_dim}, LayoutKind::Norm);
      add("attn_k_norm.weight", "self_attn.k_norm.weight", {p.head_dim}, LayoutKind::Norm);
    }
    add("attn_output.weight", "self_attn.o_proj.weight", {q_dim, dim}, LayoutKind::Matrix);
    if (gemma) {
      add("post_attention_norm.weight", "post_attention_layernorm.weight", {dim}, LayoutKind::Norm);
      add("ffn_norm.weight", "pre_feedforward_layernorm.weight", {dim}, LayoutKind::Norm);
    } else {
      add("ffn_norm.weight", "post_attention_layernorm.weight", {dim}, LayoutKind::Norm);
    }
    if (p.is_moe()) {
      const int64_t eff = p.expert_ffn_dim, n = p.n_experts;
      add("ffn_gate_inp.weight", "mlp.gate.weight", {dim, n}, LayoutKind::Router);
      add("ffn_gate_exps.weight", "mlp.experts.{e}.gate_proj.weight", {dim, eff, n},
          LayoutKind::Matrix, 0, p.n_experts);
      add("ffn_up_exps.weight", "mlp.experts.{e}.up_proj.weight", {dim, eff, n}, LayoutKind::Matrix,
          0, p.n_experts);
      add("ffn_down_exps.weight", "mlp.experts.{e}.down_proj.weight", {eff, dim, n},
          LayoutKind::Matrix, 0, p.n_experts);
    } else {
      add("ffn_gate.weight", "mlp.gate_proj.weight", {dim, ffn}, LayoutKind::Matrix);
      add("ffn_up.weight", "mlp.up_proj.weight", {dim, ffn}, LayoutKind::Matrix);
      add("ffn_down.weight", "mlp.down_proj.weight", {ffn, dim}, LayoutKind::Matrix);
    }
    if (gemma) {
      add("post_ffw_norm.weight", "post_feedforward_layernorm.weight", {dim}, LayoutKind::Norm);
    }
  }
  list.push_back(
      {"output_norm.weight", "model.norm.weight", {dim}, LayoutKind::Norm, 0, norm_offset});
  if (!p.tied_output) list.push_back({"output.weight", "lm_head.weight", {dim, vocab}});
  return list;
}

std::string expert_hf_name(const LayoutTensor& t, int expert) {
  std::string name = t.hf_name;
  const size_t at = name.find("{e}");
  if (at != std::string::npos) name.replace(at, 3, std::to_string(expert));
  return name;
}

int64_t hf_row_of(const LayoutTensor& t, int64_t row) {
  if (t.permute_head_rows == 0) return row;
  // Within a head, GGUF row 2*i + j holds Hugging Face row j*half + i.
  const int64_t head_rows = t.permute_head_rows, half = head_rows / 2;
  const int64_t head = row / head_rows, within = row % head_rows;
  return head * head_rows + (within % 2) * half + within / 2;
}

}  // namespace k25
