// Batched decode throughput, measured the way llama.cpp's llama-batched-bench does, so the two
// can be compared side by side: `n_parallel` sequences each prefill `n_prompt` tokens (one
// batch, cut into chunks of at most `max_batch_tokens`), then decode `n_generate` steps in which
// every sequence adds one token (one forward call of n_parallel tokens per step). The KV cache
// is the engine's paged one (rows of kv_dtype), read through an L1 window (L1WindowKvCache) when
// l1_window > 0.
#pragma once

#include <vector>

#include "model/model.h"

namespace k25 {

struct BatchedBenchCase {
  int n_prompt = 128;
  int n_generate = 128;
  int n_parallel = 1;
  int l1_window = 0;  // L1 ring positions per sequence; 0: no L1 tier
  KvDtype kv_dtype = KvDtype::kF32;
  // Per sequence (n_parallel of them): its compute plan (null: the whole model); empty: every
  // call runs under run_batched_bench's `plan`. The sequences of different plans share each
  // forward call (Model::forward_mixed), or, with call_per_plan, every step makes one call per
  // distinct plan (how the engine ran them before issue 16).
  std::vector<const ComputePlan*> sequence_plans = {};
  bool call_per_plan = false;
};

struct BatchedBenchResult {
  BatchedBenchCase c;
  double prefill_s = 0;     // all n_parallel * n_prompt prompt tokens
  double decode_s = 0;      // all n_generate steps
  double l1_hit_share = 0;  // of the keys the decode steps read, the share the L1 ring served
  double prefill_tokens_per_s() const { return c.n_parallel * double(c.n_prompt) / prefill_s; }
  double decode_tokens_per_s() const { return c.n_parallel * double(c.n_generate) / decode_s; }
};

// Throws k25::Error when a sequence would not fit the model's context. Every forward call runs
// under `plan` (null: the whole model).
BatchedBenchResult run_batched_bench(Model& model, const BatchedBenchCase& c, ThreadPool& pool,
                                     int max_batch_tokens = 2048,
                                     const ComputePlan* plan = nullptr);

}  // namespace k25
