// GGUF v2/v3 reader (mmap'd, every offset bounds-checked) and writer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "core/tensor.h"

namespace k25 {

class MappedFile;

// GGUF metadata value types (the file's type ids).
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// One metadata value. Scalars are widened: integers to int64/uint64, floats to double.
// Arrays keep their element type; string arrays are held as std::vector<std::string>.
struct GgufValue {
  GgufType type = GgufType::U32;
  GgufType array_type = GgufType::U32;  // element type when type == ARRAY
  std::variant<int64_t, uint64_t, double, bool, std::string, std::vector<int64_t>,
               std::vector<double>, std::vector<std::string>>
      value;
};

class GgufFile {
 public:
  // Opens and validates a file; throws k25::Error naming the file and the problem.
  static std::unique_ptr<GgufFile> open(const std::string& path);
  // Parses an in-memory image (used by the fuzzer and tests). The buffer must outlive the object.
  static std::unique_ptr<GgufFile> parse(const uint8_t* data, size_t size, std::string label);
  ~GgufFile();
  GgufFile(const GgufFile&) = delete;
  GgufFile& operator=(const GgufFile&) = delete;

  uint32_t version() const { return version_; }
  const std::string& path() const { return label_; }

  bool has(std::string_view key) const;
  const GgufValue* find(std::string_view key) const;
  // Typed getters: throw k25::Error if the key is missing or has an incompatible type.
  std::string get_string(std::string_view key) const;
  int64_t get_int(std::string_view key) const;   // any integer type
  double get_float(std::string_view key) const;  // any float or integer type
  bool get_bool(std::string_view key) const;
  const std::vector<std::string>& get_string_array(std::string_view key) const;
  std::vector<double> get_float_array(std::string_view key) const;  // float or int arrays
  std::vector<int64_t> get_int_array(std::string_view key) const;
  // Defaults when absent (still throw on a wrong type).
  std::string get_string_or(std::string_view key, std::string fallback) const;
  int64_t get_int_or(std::string_view key, int64_t fallback) const;
  double get_float_or(std::string_view key, double fallback) const;
  bool get_bool_or(std::string_view key, bool fallback) const;

  const std::map<std::string, GgufValue, std::less<>>& metadata() const { return metadata_; }
  const std::vector<TensorView>& tensors() const { return tensors_; }
  // nullptr when absent.
  const TensorView* tensor(std::string_view name) const;

 private:
  GgufFile() = default;
  std::string label_;
  uint32_t version_ = 0;
  std::map<std::string, GgufValue, std::less<>> metadata_;
  std::vector<TensorView> tensors_;
  std::unique_ptr<MappedFile> mapping_;  // null for parse()d buffers
  friend class GgufParser;
};

// Writes GGUF v3 files: metadata first, then tensors (data aligned to `alignment`).
class GgufWriter {
 public:
  explicit GgufWriter(uint32_t alignment = 32) : alignment_(alignment) {}
  void set(std::string key, GgufValue value);
  void set_string(std::string key, std::string value);
  void set_u32(std::string key, uint32_t value);
  void set_i32(std::string key, int32_t value);
  void set_f32(std::string key, float value);
  void set_bool(std::string key, bool value);
  void set_string_array(std::string key, std::vector<std::string> values);
  void set_f32_array(std::string key, std::vector<double> values);
  void set_i32_array(std::string key, std::vector<int64_t> values);
  // Data must already be encoded in `type` (ne[0] = row length); it is copied.
  void add_tensor(std::string name, DType type, std::vector<int64_t> ne, const void* data,
                  size_t bytes);
  // A tensor whose data the producer of write(path, produce) streams; returns its byte size.
  size_t declare_tensor(std::string name, DType type, std::vector<int64_t> ne);
  // Writes the file; throws k25::Error on I/O failure.
  void write(const std::string& path) const;
  // Streams the data of declared tensors: `produce(i, emit)` is called once per tensor, in
  // order, and hands the encoded bytes to `emit` in as many pieces as it likes (they must add up
  // to the tensor's size). Tensors added with data are written from it. The file is written
  // to `path` + ".tmp" and renamed when complete, so a failed conversion leaves no partial file.
  using Emit = std::function<void(const void* data, size_t bytes)>;
  using Producer = std::function<void(size_t index, const Emit& emit)>;
  void write(const std::string& path, const Producer& produce) const;

 private:
  struct Tensor {
    std::string name;
    DType type;
    std::vector<int64_t> ne;
    size_t bytes = 0;
    std::vector<uint8_t> data;  // empty for declared tensors
    bool declared = false;
  };
  size_t check_tensor(const std::string& name, DType type, const std::vector<int64_t>& ne) const;
  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace k25
