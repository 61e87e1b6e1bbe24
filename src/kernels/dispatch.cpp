// The kernel functions of matmul.h, attention.h, ops.h, quant.h, block_types.h and repack.h:
// each calls the active kernel set's entry (kernel_table.h).
#include <cstdlib>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/block_types.h"
#include "kernels/kernel_select.h"
#include "kernels/kernel_table.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "kernels/repack.h"

namespace k25 {

// Each set's table, defined in its namespace by src/kernels/set/kernel_table.cpp.
namespace isa_scalar {
const KernelTable& kernel_table();
}
#if defined(__x86_64__)
namespace isa_avx2 {
const KernelTable& kernel_table();
}
namespace isa_avxvnni {
const KernelTable& kernel_table();
}
namespace isa_avx512 {
const KernelTable& kernel_table();
}
#endif

namespace {

const KernelTable* const kCompiledSets[] = {
    &isa_scalar::kernel_table(),
#if defined(__x86_64__)
    &isa_avx2::kernel_table(),
    &isa_avxvnni::kernel_table(),
    &isa_avx512::kernel_table(),
#endif
};

const KernelTable& choose() {
  const char* requested = std::getenv("K25_ISA");
  const std::string isa =
      choose_kernel_isa(detect_cpu_features(), requested != nullptr ? requested : "");
  const KernelTable* table = find_kernel_table(isa);
  if (table == nullptr) fail("kernel set ", isa, " is not compiled into this binary");
  return *table;
}

}  // namespace

const KernelTable& kernels() {
  static const KernelTable& active = choose();
  return active;
}

const KernelTable* find_kernel_table(std::string_view isa) {
  for (const KernelTable* t : kCompiledSets) {
    if (isa == t->isa) return t;
  }
  return nullptr;
}

std::vector<std::string> runnable_kernel_isas() {
  const CpuFeatures cpu = detect_cpu_features();
  std::vector<std::string> out;
  for (const KernelTable* t : kCompiledSets) {
    if (missing_feature(cpu, t->isa).empty()) out.emplace_back(t->isa);
  }
  return out;
}

void matmul(const TensorView& w, const float* x, int n_tokens, float* y, ThreadPool& pool) {
  kernels().matmul(w, x, n_tokens, y, pool);
}
void matmul_same_input(const TensorView* const* ws, float* const* ys, int n, const float* x,
                       int n_tokens, ThreadPool& pool) {
  kernels().matmul_same_input(ws, ys, n, x, n_tokens, pool);
}

void attend_queries(const AttentionQuery* queries, int n_queries, const KvSpan* spans, int n_spans,
                    int kv_stride, int head_dim, float scale, std::vector<float>& scores,
                    KvDtype dtype) {
  kernels().attend_queries(queries, n_queries, spans, n_spans, kv_stride, head_dim, scale, scores,
                           dtype);
}

void rmsnorm(float* out, const float* x, const float* weight, int n, float eps) {
  kernels().rmsnorm(out, x, weight, n, eps);
}

void softmax(float* x, int n) {
  kernels().softmax(x, n);
}

float exp_minus_max(float* x, int n) {
  return kernels().exp_minus_max(x, n);
}

void silu_mul(float* a, const float* b, int n) {
  kernels().silu_mul(a, b, n);
}

void gelu_f16_mul(float* a, const float* b, int n) {
  kernels().gelu_f16_mul(a, b, n);
}

void add_inplace(float* a, const float* b, int n) {
  kernels().add_inplace(a, b, n);
}

float dot_f32(const float* a, const float* b, int n) {
  return kernels().dot_f32(a, b, n);
}

void axpy(float* a, float s, const float* b, int n) {
  kernels().axpy(a, s, b, n);
}

void f16_row_to_f32(const uint16_t* src, float* dst, int64_t n) {
  kernels().f16_row_to_f32(src, dst, n);
}

void f32_row_to_f16(const float* src, uint16_t* dst, int64_t n) {
  kernels().f32_row_to_f16(src, dst, n);
}

void dequantize_row(DType type, const void* src, float* dst, int64_t n) {
  kernels().dequantize_row(type, src, dst, n);
}

void quantize_row(DType type, const float* src, void* dst, int64_t n) {
  kernels().quantize_row(type, src, dst, n);
}

void quantize_acts(ActFormat format, const float* x, void* out, int64_t n) {
  kernels().quantize_acts(format, x, out, n);
}

const BlockTypeKernels* block_type_kernels(DType type) {
  return kernels().block_type_kernels(type);
}

bool repack_supported(DType type) {
  return kernels().repack_supported(type);
}

PackedWeights repack_matrices(const std::vector<TensorView*>& weights, int n_threads,
                              const RepackedRangeFn& on_repacked) {
  return kernels().repack_matrices(weights, n_threads, on_repacked);
}

}  // namespace k25
