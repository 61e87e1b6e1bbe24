// The Hugging Face half of k25-mkmodel: collects float16 tensors under their Hugging Face names
// and writes config.json, model.safetensors (or two shards and an index) and tokenizer.json.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/arch_params.h"

namespace k25 {

class GgufFile;

class MkHfWriter {
 public:
  MkHfWriter(std::string dir, bool sharded) : dir_(std::move(dir)), sharded_(sharded) {}
  // shape is in Hugging Face order (outermost first, e.g. [out_features, in_features]).
  void add_f16(std::string name, std::vector<int64_t> shape, std::vector<uint16_t> data);
  // `params.n_vocab` must be set; bos/eos ids and the vocabulary come from `vocab`.
  void write(const ArchParams& params, const GgufFile& vocab) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<int64_t> shape;
    std::vector<uint16_t> data;
  };
  void write_config(const ArchParams& params, const GgufFile& vocab) const;
  void write_weights() const;
  std::string dir_;
  bool sharded_;
  std::vector<Tensor> tensors_;
};

}  // namespace k25
