// Deterministic random weights for generated models. Each tensor's values depend only on the seed
// and the tensor's name, so the GGUF file and the Hugging Face directory written from one seed
// hold the same model whatever order the tensors are produced in.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

namespace k25 {

class ThreadPool;

enum class MkInit {
  Matrix,  // weights: uniform with standard deviation 0.02
  Norm,    // RMSNorm gains: 1.0 with a little noise
  Bias,    // biases: uniform with standard deviation 0.02
};

// n values for the tensor `name`, rounded to the nearest float16 so that F16 and F32 copies of
// the same tensor are equal. The values do not depend on the pool's size.
std::vector<float> mkmodel_random_values(uint64_t seed, std::string_view name, MkInit init,
                                         int64_t n, ThreadPool& pool);

}  // namespace k25
