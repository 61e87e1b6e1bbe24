// Hugging Face safetensors: a reader (mmap'd, every offset bounds-checked), a loader for a model
// directory (one file or index-listed shards), and a writer.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace k25 {

class MappedFile;

// One safetensors file. Tensors are F32, F16 or BF16; a tensor's row-major shape
// [d0, ..., dn] becomes ne[0] = dn (the contiguous axis), ..., ne[n] = d0.
class SafetensorsFile {
 public:
  // Opens and validates a file; throws k25::Error naming the file and the problem.
  static std::unique_ptr<SafetensorsFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzzer and tests). The buffer must outlive the object.
  static std::unique_ptr<SafetensorsFile> parse(const uint8_t* data, size_t size,
                                                std::string label);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return label_; }
  // The header's "__metadata__" string map (empty when absent).
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // In the order of their data offsets.
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* tensor(std::string_view name) const;

 private:
  SafetensorsFile() = default;
  std::string label_;
  std::map<std::string, std::string> metadata_;
  std::vector<TensorView> tensors_;
  std::unique_ptr<MappedFile> mapping_;  // null for parse()d buffers
};

// The weights of a Hugging Face model directory: `model.safetensors`, or the shards named by the
// weight_map of `model.safetensors.index.json` when that file exists.
class SafetensorsSet {
 public:
  static std::unique_ptr<SafetensorsSet> open_dir(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // nullptr when absent.
  const TensorView* tensor(std::string_view name) const;
  // Throws k25::Error naming the directory and the tensor when absent.
  const TensorView& require(std::string_view name) const;
  // Sorted by name.
  std::vector<const TensorView*> tensors() const;
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

 private:
  SafetensorsSet() = default;
  std::string dir_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*, std::less<>> by_name_;
};

// A tensor to write: `shape` is row-major (outermost first); `data` holds `bytes` bytes encoded
// in `type` (F32, F16 or BF16).
struct SafetensorsTensor {
  std::string name;
  DType type = DType::F32;
  std::vector<int64_t> shape;
  const void* data = nullptr;
  size_t bytes = 0;
};

// Writes one safetensors file, tensors in the given order; the header is padded with spaces so
// the data section starts 8-byte aligned. Throws k25::Error on bad input or I/O failure.
void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

}  // namespace k25
