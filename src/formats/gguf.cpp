// GGUF reader and writer. The reader trusts nothing in the file: every length, count and offset is
// checked against the bytes that remain before it is used, so a corrupt or hostile file yields a
// k25::Error and never an out-of-bounds access or a huge allocation. Values are read little-endian
// (the only byte order k25 targets; a big-endian file shows up as an absurd version number).
#include "formats/gguf.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <set>
#include <utility>

#include "core/bits.h"
#include "core/error.h"
#include "core/mapped_file.h"

namespace k25 {

namespace {

constexpr uint32_t kDefaultAlignment = 32;
constexpr int kMaxDims = 4;
constexpr char kAlignmentKey[] = "general.alignment";

// Size of a tensor encoding: `block_bytes` bytes hold `block_elems` consecutive row elements.
struct Encoding {
  int64_t block_elems;
  uint64_t block_bytes;
};

std::optional<Encoding> encoding_of(uint32_t ggml_type) {
  const DTypeInfo* info = dtype_info(static_cast<DType>(ggml_type));
  if (info == nullptr) return std::nullopt;
  return Encoding{info->block_elements, info->block_bytes};
}

// GGML's names for type ids, so an unsupported tensor is reported the way llama.cpp users know it.
const char* ggml_type_name(uint32_t id) {
  static constexpr const char* kNames[] = {
      "F32",   "F16",        "Q4_0",       "Q4_1",       "Q4_2",     "Q4_3",     "Q5_0",
      "Q5_1",  "Q8_0",       "Q8_1",       "Q2_K",       "Q3_K",     "Q4_K",     "Q5_K",
      "Q6_K",  "Q8_K",       "IQ2_XXS",    "IQ2_XS",     "IQ3_XXS",  "IQ1_S",    "IQ4_NL",
      "IQ3_S", "IQ2_S",      "IQ4_XS",     "I8",         "I16",      "I32",      "I64",
      "F64",   "IQ1_M",      "BF16",       "Q4_0_4_4",   "Q4_0_4_8", "Q4_0_8_8", "TQ1_0",
      "TQ2_0", "IQ4_NL_4_4", "IQ4_NL_4_8", "IQ4_NL_8_8", "MXFP4"};
  return id < std::size(kNames) ? kNames[id] : "unknown";
}

const char* value_type_name(GgufType type) {
  switch (type) {
    case GgufType::U8:
      return "u8";
    case GgufType::I8:
      return "i8";
    case GgufType::U16:
      return "u16";
    case GgufType::I16:
      return "i16";
    case GgufType::U32:
      return "u32";
    case GgufType::I32:
      return "i32";
    case GgufType::F32:
      return "f32";
    case GgufType::BOOL:
      return "bool";
    case GgufType::STRING:
      return "string";
    case GgufType::ARRAY:
      return "array";
    case GgufType::U64:
      return "u64";
    case GgufType::I64:
      return "i64";
    case GgufType::F64:
      return "f64";
  }
  return "unknown";
}

std::string describe(const GgufValue& v) {
  if (v.type == GgufType::ARRAY) return concat("array of ", value_type_name(v.array_type));
  return value_type_name(v.type);
}

bool is_signed_int(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}
bool is_unsigned_int(GgufType t) {
  return t == GgufType::U8 || t == GgufType::U16 || t == GgufType::U32 || t == GgufType::U64;
}
bool is_int(GgufType t) {
  return is_signed_int(t) || is_unsigned_int(t);
}
bool is_float(GgufType t) {
  return t == GgufType::F32 || t == GgufType::F64;
}
bool is_known(uint32_t t) {
  return t <= static_cast<uint32_t>(GgufType::F64);
}

// Bytes a scalar of type t occupies on disk (strings and arrays excluded).
size_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::BOOL:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    default:
      return 8;
  }
}

bool checked_mul(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out);
}
bool checked_add(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_add_overflow(a, b, out);
}

// Bounds-checked little-endian reads from the file image.
class Cursor {
 public:
  Cursor(const uint8_t* data, size_t size, const std::string& label)
      : data_(data), size_(size), label_(label) {}

  size_t pos() const { return pos_; }
  size_t remaining() const { return size_ - pos_; }

  template <typename T>
  T read(const char* what) {
    need(sizeof(T), what);
    T value;
    std::memcpy(&value, data_ + pos_, sizeof(T));
    pos_ += sizeof(T);
    return value;
  }

  std::string read_string(const char* what) {
    const uint64_t len = read<uint64_t>(what);
    if (len > remaining()) {
      fail(label_, ": ", what, " claims ", len, " bytes but only ", remaining(),
           " remain (truncated or corrupt file)");
    }
    std::string s(reinterpret_cast<const char*>(data_ + pos_), len);
    pos_ += len;
    return s;
  }

  // Rejects a count of items, each at least min_bytes long, that the remaining bytes cannot hold.
  void check_count(uint64_t count, uint64_t min_bytes, const char* what) const {
    if (count > remaining() / min_bytes) {
      fail(label_, ": ", what, " ", count, " is larger than the remaining ", remaining(),
           " bytes could hold (truncated or corrupt file)");
    }
  }

 private:
  void need(size_t n, const char* what) const {
    if (n > remaining()) {
      fail(label_, ": file ends at byte ", size_, " while reading ", what, " (truncated file)");
    }
  }

  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
  const std::string& label_;
};

struct TensorInfo {
  TensorView view;
  uint64_t offset = 0;
};

}  // namespace

// Parses the whole image into a GgufFile; a class (not free functions) so it can fill the
// private members GgufFile grants it as a friend.
class GgufParser {
 public:
  GgufParser(const uint8_t* data, size_t size, std::string label)
      : data_(data), size_(size), out_(new GgufFile()), cur_(data, size, out_->label_) {
    out_->label_ = std::move(label);
  }

  std::unique_ptr<GgufFile> run() {
    parse_header();
    const uint64_t tensor_count = cur_.read<uint64_t>("tensor count");
    const uint64_t kv_count = cur_.read<uint64_t>("metadata count");
    // A key-value pair is at least a key length, a type and a one-byte value.
    cur_.check_count(kv_count, 8 + 4 + 1, "metadata count");
    for (uint64_t i = 0; i < kv_count; ++i) parse_kv();
    const uint64_t alignment = read_alignment();
    // A tensor info is at least a name length, n_dims, one dimension, a type and an offset.
    cur_.check_count(tensor_count, 8 + 4 + 8 + 4 + 8, "tensor count");
    std::vector<TensorInfo> infos;
    infos.reserve(tensor_count);
    std::set<std::string, std::less<>> names;
    for (uint64_t i = 0; i < tensor_count; ++i) {
      infos.push_back(parse_tensor_info());
      if (!names.insert(infos.back().view.name).second) {
        fail(label(), ": tensor '", infos.back().view.name, "' appears more than once");
      }
    }
    place_tensors(infos, alignment);
    out_->tensors_.reserve(infos.size());
    for (TensorInfo& info : infos) out_->tensors_.push_back(std::move(info.view));
    return std::move(out_);
  }

 private:
  const std::string& label() const { return out_->label_; }

  void parse_header() {
    if (size_ < 4 || std::memcmp(data_, "GGUF", 4) != 0) {
      fail(label(), ": not a GGUF file (missing 'GGUF' magic)");
    }
    cur_.read<uint32_t>("magic");
    const uint32_t version = cur_.read<uint32_t>("version");
    if (version == 1) {
      fail(label(), ": GGUF version 1 is not supported (k25 reads v2 and v3; re-convert the ",
           "model with a current llama.cpp)");
    }
    if (version == __builtin_bswap32(2) || version == __builtin_bswap32(3)) {
      fail(label(),
           ": big-endian GGUF files are not supported (k25 reads little-endian v2 and v3)");
    }
    if (version != 2 && version != 3) {
      fail(label(), ": unsupported GGUF version ", version,
           " (k25 reads v2 and v3 little-endian files)");
    }
    out_->version_ = version;
  }

  void parse_kv() {
    std::string key = cur_.read_string("metadata key");
    const uint32_t type = cur_.read<uint32_t>("metadata value type");
    if (!is_known(type)) fail(label(), ": metadata key '", key, "' has unknown type id ", type);
    GgufValue value;
    value.type = static_cast<GgufType>(type);
    if (value.type == GgufType::ARRAY) {
      read_array(key, &value);
    } else {
      read_scalar(key, value.type, &value);
    }
    if (!out_->metadata_.emplace(key, std::move(value)).second) {
      fail(label(), ": metadata key '", key, "' appears more than once");
    }
  }

  void read_scalar(const std::string& key, GgufType type, GgufValue* value) {
    switch (type) {
      case GgufType::U8:
        value->value = uint64_t{cur_.read<uint8_t>("metadata value")};
        break;
      case GgufType::I8:
        value->value = int64_t{cur_.read<int8_t>("metadata value")};
        break;
      case GgufType::U16:
        value->value = uint64_t{cur_.read<uint16_t>("metadata value")};
        break;
      case GgufType::I16:
        value->value = int64_t{cur_.read<int16_t>("metadata value")};
        break;
      case GgufType::U32:
        value->value = uint64_t{cur_.read<uint32_t>("metadata value")};
        break;
      case GgufType::I32:
        value->value = int64_t{cur_.read<int32_t>("metadata value")};
        break;
      case GgufType::U64:
        value->value = cur_.read<uint64_t>("metadata value");
        break;
      case GgufType::I64:
        value->value = cur_.read<int64_t>("metadata value");
        break;
      case GgufType::F32:
        value->value = double{cur_.read<float>("metadata value")};
        break;
      case GgufType::F64:
        value->value = cur_.read<double>("metadata value");
        break;
      case GgufType::BOOL:
        value->value = cur_.read<uint8_t>("metadata value") != 0;
        break;
      case GgufType::STRING:
        value->value = cur_.read_string("metadata string");
        break;
      case GgufType::ARRAY:
        fail(label(), ": metadata key '", key, "' is a nested array, which k25 does not support");
    }
  }

  // Integer and bool arrays become int64 vectors, float arrays double vectors, string arrays
  // string vectors.
  void read_array(const std::string& key, GgufValue* value) {
    const uint32_t elem = cur_.read<uint32_t>("array element type");
    if (!is_known(elem)) {
      fail(label(), ": metadata key '", key, "' is an array of unknown type id ", elem);
    }
    value->array_type = static_cast<GgufType>(elem);
    if (value->array_type == GgufType::ARRAY) {
      fail(label(), ": metadata key '", key, "' is a nested array, which k25 does not support");
    }
    const uint64_t count = cur_.read<uint64_t>("array length");
    const bool strings = value->array_type == GgufType::STRING;
    cur_.check_count(count, strings ? 8 : scalar_bytes(value->array_type), "array length");
    if (strings) {
      std::vector<std::string> items;
      items.reserve(count);
      for (uint64_t i = 0; i < count; ++i) items.push_back(cur_.read_string("array string"));
      value->value = std::move(items);
    } else if (is_float(value->array_type)) {
      std::vector<double> items;
      items.reserve(count);
      GgufValue scalar;
      for (uint64_t i = 0; i < count; ++i) {
        read_scalar(key, value->array_type, &scalar);
        items.push_back(std::get<double>(scalar.value));
      }
      value->value = std::move(items);
    } else {
      std::vector<int64_t> items;
      items.reserve(count);
      GgufValue scalar;
      for (uint64_t i = 0; i < count; ++i) {
        read_scalar(key, value->array_type, &scalar);
        if (const auto* u = std::get_if<uint64_t>(&scalar.value)) {
          if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
            fail(label(), ": metadata key '", key, "' holds ", *u,
                 ", which does not fit in a signed 64-bit integer");
          }
          items.push_back(static_cast<int64_t>(*u));
        } else if (const auto* b = std::get_if<bool>(&scalar.value)) {
          items.push_back(*b ? 1 : 0);
        } else {
          items.push_back(std::get<int64_t>(scalar.value));
        }
      }
      value->value = std::move(items);
    }
  }

  uint64_t read_alignment() const {
    const GgufValue* v = out_->find(kAlignmentKey);
    if (v == nullptr) return kDefaultAlignment;
    if (!is_int(v->type)) {
      fail(label(), ": metadata key '", kAlignmentKey, "' has type ", describe(*v),
           ", expected an integer");
    }
    uint64_t alignment = 0;
    if (const auto* u = std::get_if<uint64_t>(&v->value)) {
      alignment = *u;
    } else if (const int64_t s = std::get<int64_t>(v->value); s > 0) {
      alignment = static_cast<uint64_t>(s);
    }
    // The cap keeps alignment arithmetic far from overflow; real files use 32 or a page size.
    if (!is_power_of_two(alignment) || alignment > (uint64_t{1} << 30)) {
      fail(label(), ": ", kAlignmentKey, " must be a power of two between 1 and 2^30");
    }
    return alignment;
  }

  TensorInfo parse_tensor_info() {
    TensorInfo info;
    TensorView& t = info.view;
    t.name = cur_.read_string("tensor name");
    const uint32_t n_dims = cur_.read<uint32_t>("tensor dimension count");
    if (n_dims == 0 || n_dims > kMaxDims) {
      fail(label(), ": tensor '", t.name, "' has ", n_dims, " dimensions (k25 supports 1 to ",
           kMaxDims, ")");
    }
    t.n_dims = static_cast<int>(n_dims);
    uint64_t elements = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = cur_.read<uint64_t>("tensor dimension");
      if (ne == 0 || ne > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(label(), ": tensor '", t.name, "' has invalid dimension ", d, " = ", ne);
      }
      if (!checked_mul(elements, ne, &elements) ||
          elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(label(), ": tensor '", t.name,
             "' has too many elements (dimension product overflows)");
      }
      t.ne[d] = static_cast<int64_t>(ne);
    }
    const uint32_t type = cur_.read<uint32_t>("tensor type");
    const std::optional<Encoding> enc = encoding_of(type);
    if (!enc) {
      fail(
          label(), ": tensor '", t.name, "' has type ", ggml_type_name(type), " (", type,
          "), which k25 does not support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, "
          "Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
    }
    t.type = static_cast<DType>(type);
    if (t.ne[0] % enc->block_elems != 0) {
      fail(label(), ": tensor '", t.name, "' has row length ", t.ne[0], ", not a multiple of the ",
           dtype_name(t.type), " block size ", enc->block_elems);
    }
    uint64_t bytes = 0;
    if (!checked_mul(elements / enc->block_elems, enc->block_bytes, &bytes) ||
        bytes > std::numeric_limits<size_t>::max()) {
      fail(label(), ": tensor '", t.name, "' is too large");
    }
    t.bytes = bytes;
    info.offset = cur_.read<uint64_t>("tensor data offset");
    return info;
  }

  // Points every tensor into the data section after checking alignment, range and overlap.
  void place_tensors(std::vector<TensorInfo>& infos, uint64_t alignment) {
    uint64_t data_start = 0;
    if (!checked_add(cur_.pos(), alignment - 1, &data_start)) fail(label(), ": bad alignment");
    data_start -= data_start % alignment;
    if (infos.empty()) return;
    if (data_start > size_) {
      fail(label(), ": tensor data section would start at byte ", data_start,
           " past the end of the file (", size_, " bytes; truncated file)");
    }
    const uint64_t data_bytes = size_ - data_start;
    for (TensorInfo& info : infos) {
      if (info.offset % alignment != 0) {
        fail(label(), ": tensor '", info.view.name, "' data offset ", info.offset,
             " is not a multiple of the alignment ", alignment);
      }
      uint64_t end = 0;
      if (!checked_add(info.offset, info.view.bytes, &end) || end > data_bytes) {
        fail(label(), ": tensor '", info.view.name, "' (", info.view.bytes, " bytes at offset ",
             info.offset, ") extends past the end of the file (data section holds ", data_bytes,
             " bytes; truncated file?)");
      }
      info.view.data = data_ + data_start + info.offset;
    }
    std::vector<const TensorInfo*> by_offset;
    by_offset.reserve(infos.size());
    for (const TensorInfo& info : infos) by_offset.push_back(&info);
    std::sort(by_offset.begin(), by_offset.end(),
              [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
    for (size_t i = 1; i < by_offset.size(); ++i) {
      const TensorInfo& prev = *by_offset[i - 1];
      const TensorInfo& next = *by_offset[i];
      if (prev.offset + prev.view.bytes > next.offset) {
        fail(label(), ": tensors '", prev.view.name, "' and '", next.view.name,
             "' overlap in the data section");
      }
    }
  }

  const uint8_t* data_;
  size_t size_;
  std::unique_ptr<GgufFile> out_;
  Cursor cur_;
};

std::unique_ptr<GgufFile> GgufFile::parse(const uint8_t* data, size_t size, std::string label) {
  if (data == nullptr && size != 0) fail(label, ": no data");
  return GgufParser(data, size, std::move(label)).run();
}

std::unique_ptr<GgufFile> GgufFile::open(const std::string& path) {
  std::unique_ptr<MappedFile> mapping = MappedFile::open(path, "GGUF model");
  std::unique_ptr<GgufFile> file = parse(mapping->data(), mapping->size(), path);
  file->mapping_ = std::move(mapping);
  for (TensorView& t : file->tensors_) t.file = file->mapping_.get();
  return file;
}

GgufFile::~GgufFile() = default;

bool GgufFile::has(std::string_view key) const {
  return find(key) != nullptr;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  auto it = metadata_.find(key);
  return it == metadata_.end() ? nullptr : &it->second;
}

const TensorView* GgufFile::tensor(std::string_view name) const {
  for (const TensorView& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

namespace {

const GgufValue& require(const GgufFile& f, std::string_view key) {
  const GgufValue* v = f.find(key);
  if (v == nullptr) fail(f.path(), ": metadata key '", key, "' is missing");
  return *v;
}

[[noreturn]] void wrong_type(const GgufFile& f, std::string_view key, const GgufValue& v,
                             const char* expected) {
  fail(f.path(), ": metadata key '", key, "' has type ", describe(v), ", expected ", expected);
}

std::string as_string(const GgufFile& f, std::string_view key, const GgufValue& v) {
  if (v.type != GgufType::STRING) wrong_type(f, key, v, "a string");
  return std::get<std::string>(v.value);
}

int64_t as_int(const GgufFile& f, std::string_view key, const GgufValue& v) {
  if (!is_int(v.type)) wrong_type(f, key, v, "an integer");
  if (const auto* u = std::get_if<uint64_t>(&v.value)) {
    if (*u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      fail(f.path(), ": metadata key '", key, "' holds ", *u,
           ", which does not fit in a signed 64-bit integer");
    }
    return static_cast<int64_t>(*u);
  }
  return std::get<int64_t>(v.value);
}

double as_float(const GgufFile& f, std::string_view key, const GgufValue& v) {
  if (is_float(v.type)) return std::get<double>(v.value);
  if (const auto* u = std::get_if<uint64_t>(&v.value); u && is_int(v.type)) {
    return static_cast<double>(*u);
  }
  if (const auto* s = std::get_if<int64_t>(&v.value); s && is_int(v.type)) {
    return static_cast<double>(*s);
  }
  wrong_type(f, key, v, "a number");
}

bool as_bool(const GgufFile& f, std::string_view key, const GgufValue& v) {
  if (v.type != GgufType::BOOL) wrong_type(f, key, v, "a bool");
  return std::get<bool>(v.value);
}

}  // namespace

std::string GgufFile::get_string(std::string_view key) const {
  return as_string(*this, key, require(*this, key));
}
int64_t GgufFile::get_int(std::string_view key) const {
  return as_int(*this, key, require(*this, key));
}
double GgufFile::get_float(std::string_view key) const {
  return as_float(*this, key, require(*this, key));
}
bool GgufFile::get_bool(std::string_view key) const {
  return as_bool(*this, key, require(*this, key));
}

const std::vector<std::string>& GgufFile::get_string_array(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufType::ARRAY || v.array_type != GgufType::STRING) {
    wrong_type(*this, key, v, "an array of strings");
  }
  return std::get<std::vector<std::string>>(v.value);
}

std::vector<double> GgufFile::get_float_array(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type == GgufType::ARRAY && is_float(v.array_type)) {
    return std::get<std::vector<double>>(v.value);
  }
  if (v.type == GgufType::ARRAY && is_int(v.array_type)) {
    const auto& ints = std::get<std::vector<int64_t>>(v.value);
    return std::vector<double>(ints.begin(), ints.end());
  }
  wrong_type(*this, key, v, "an array of numbers");
}

std::vector<int64_t> GgufFile::get_int_array(std::string_view key) const {
  const GgufValue& v = require(*this, key);
  if (v.type != GgufType::ARRAY || !is_int(v.array_type)) {
    wrong_type(*this, key, v, "an array of integers");
  }
  return std::get<std::vector<int64_t>>(v.value);
}

std::string GgufFile::get_string_or(std::string_view key, std::string fallback) const {
  const GgufValue* v = find(key);
  return v ? as_string(*this, key, *v) : fallback;
}
int64_t GgufFile::get_int_or(std::string_view key, int64_t fallback) const {
  const GgufValue* v = find(key);
  return v ? as_int(*this, key, *v) : fallback;
}
double GgufFile::get_float_or(std::string_view key, double fallback) const {
  const GgufValue* v = find(key);
  return v ? as_float(*this, key, *v) : fallback;
}
bool GgufFile::get_bool_or(std::string_view key, bool fallback) const {
  const GgufValue* v = find(key);
  return v ? as_bool(*this, key, *v) : fallback;
}

// ---- Writer ----

void GgufWriter::set(std::string key, GgufValue value) {
  for (auto& [k, v] : metadata_) {
    if (k == key) {
      v = std::move(value);
      return;
    }
  }
  metadata_.emplace_back(std::move(key), std::move(value));
}

void GgufWriter::set_string(std::string key, std::string value) {
  set(std::move(key), GgufValue{GgufType::STRING, GgufType::U32, std::move(value)});
}
void GgufWriter::set_u32(std::string key, uint32_t value) {
  set(std::move(key), GgufValue{GgufType::U32, GgufType::U32, uint64_t{value}});
}
void GgufWriter::set_i32(std::string key, int32_t value) {
  set(std::move(key), GgufValue{GgufType::I32, GgufType::U32, int64_t{value}});
}
void GgufWriter::set_f32(std::string key, float value) {
  set(std::move(key), GgufValue{GgufType::F32, GgufType::U32, double{value}});
}
void GgufWriter::set_bool(std::string key, bool value) {
  set(std::move(key), GgufValue{GgufType::BOOL, GgufType::U32, value});
}
void GgufWriter::set_string_array(std::string key, std::vector<std::string> values) {
  set(std::move(key), GgufValue{GgufType::ARRAY, GgufType::STRING, std::move(values)});
}
void GgufWriter::set_f32_array(std::string key, std::vector<double> values) {
  set(std::move(key), GgufValue{GgufType::ARRAY, GgufType::F32, std::move(values)});
}
void GgufWriter::set_i32_array(std::string key, std::vector<int64_t> values) {
  set(std::move(key), GgufValue{GgufType::ARRAY, GgufType::I32, std::move(values)});
}

size_t GgufWriter::check_tensor(const std::string& name, DType type,
                                const std::vector<int64_t>& ne) const {
  if (ne.empty() || ne.size() > kMaxDims) {
    fail("GGUF writer: tensor '", name, "' has ", ne.size(), " dimensions (1 to 4 allowed)");
  }
  const std::optional<Encoding> enc = encoding_of(static_cast<uint32_t>(type));
  if (!enc) fail("GGUF writer: tensor '", name, "' has an unknown type");
  uint64_t elements = 1;
  for (int64_t n : ne) {
    if (n <= 0 || !checked_mul(elements, static_cast<uint64_t>(n), &elements)) {
      fail("GGUF writer: tensor '", name, "' has an invalid shape");
    }
  }
  if (ne[0] % enc->block_elems != 0) {
    fail("GGUF writer: tensor '", name, "' row length ", ne[0], " is not a multiple of the ",
         dtype_name(type), " block size");
  }
  uint64_t expected = 0;
  if (!checked_mul(elements / enc->block_elems, enc->block_bytes, &expected)) {
    fail("GGUF writer: tensor '", name, "' is too large");
  }
  for (const Tensor& t : tensors_) {
    if (t.name == name) fail("GGUF writer: tensor '", name, "' added twice");
  }
  return expected;
}

void GgufWriter::add_tensor(std::string name, DType type, std::vector<int64_t> ne, const void* data,
                            size_t bytes) {
  const size_t expected = check_tensor(name, type, ne);
  if (expected != bytes) {
    fail("GGUF writer: tensor '", name, "' has ", bytes, " bytes of data, expected ", expected);
  }
  const auto* p = static_cast<const uint8_t*>(data);
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), bytes,
                            std::vector<uint8_t>(p, p + bytes), false});
}

size_t GgufWriter::declare_tensor(std::string name, DType type, std::vector<int64_t> ne) {
  const size_t bytes = check_tensor(name, type, ne);
  tensors_.push_back(Tensor{std::move(name), type, std::move(ne), bytes, {}, true});
  return bytes;
}

namespace {

// Appends little-endian encodings to a byte buffer.
class Sink {
 public:
  template <typename T>
  void put(T value) {
    const size_t at = bytes.size();
    bytes.resize(at + sizeof(T));
    std::memcpy(bytes.data() + at, &value, sizeof(T));
  }
  void put_string(const std::string& s) {
    put<uint64_t>(s.size());
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
  void pad_to(uint64_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
  }
  std::vector<uint8_t> bytes;
};

int64_t int_of(const std::string& key, const GgufValue& v) {
  if (const auto* s = std::get_if<int64_t>(&v.value)) return *s;
  if (const auto* u = std::get_if<uint64_t>(&v.value)) return static_cast<int64_t>(*u);
  fail("GGUF writer: metadata key '", key, "' of type ", describe(v), " holds no integer");
}

template <typename T>
void put_int(Sink& out, const std::string& key, GgufType type, const GgufValue& v) {
  // Unsigned 64-bit values above INT64_MAX only arrive as uint64; everything else as int64.
  if (const auto* u = std::get_if<uint64_t>(&v.value); u && std::in_range<T>(*u)) {
    return out.put<T>(static_cast<T>(*u));
  }
  if (const auto* s = std::get_if<int64_t>(&v.value); s && std::in_range<T>(*s)) {
    return out.put<T>(static_cast<T>(*s));
  }
  fail("GGUF writer: metadata key '", key, "' holds no value that fits in ", value_type_name(type));
}

void put_scalar(Sink& out, const std::string& key, GgufType type, const GgufValue& v) {
  switch (type) {
    case GgufType::U8:
      return put_int<uint8_t>(out, key, type, v);
    case GgufType::I8:
      return put_int<int8_t>(out, key, type, v);
    case GgufType::U16:
      return put_int<uint16_t>(out, key, type, v);
    case GgufType::I16:
      return put_int<int16_t>(out, key, type, v);
    case GgufType::U32:
      return put_int<uint32_t>(out, key, type, v);
    case GgufType::I32:
      return put_int<int32_t>(out, key, type, v);
    case GgufType::U64:
      return put_int<uint64_t>(out, key, type, v);
    case GgufType::I64:
      return put_int<int64_t>(out, key, type, v);
    case GgufType::F32:
    case GgufType::F64: {
      const auto* d = std::get_if<double>(&v.value);
      if (d == nullptr) fail("GGUF writer: metadata key '", key, "' holds no float");
      if (type == GgufType::F32) return out.put<float>(static_cast<float>(*d));
      return out.put<double>(*d);
    }
    case GgufType::BOOL: {
      const auto* b = std::get_if<bool>(&v.value);
      if (b == nullptr) fail("GGUF writer: metadata key '", key, "' holds no bool");
      return out.put<uint8_t>(*b ? 1 : 0);
    }
    case GgufType::STRING: {
      const auto* s = std::get_if<std::string>(&v.value);
      if (s == nullptr) fail("GGUF writer: metadata key '", key, "' holds no string");
      return out.put_string(*s);
    }
    case GgufType::ARRAY:
      break;
  }
  fail("GGUF writer: metadata key '", key, "' has an unwritable type");
}

void put_array(Sink& out, const std::string& key, const GgufValue& v) {
  out.put<uint32_t>(static_cast<uint32_t>(v.array_type));
  auto put_items = [&](const auto& items, auto wrap) {
    out.put<uint64_t>(items.size());
    for (const auto& item : items) put_scalar(out, key, v.array_type, wrap(item));
  };
  if (const auto* s = std::get_if<std::vector<std::string>>(&v.value);
      s && v.array_type == GgufType::STRING) {
    put_items(*s, [](const std::string& x) { return GgufValue{GgufType::STRING, {}, x}; });
  } else if (const auto* d = std::get_if<std::vector<double>>(&v.value);
             d && is_float(v.array_type)) {
    put_items(*d, [](double x) { return GgufValue{GgufType::F64, {}, x}; });
  } else if (const auto* i = std::get_if<std::vector<int64_t>>(&v.value);
             i && (is_int(v.array_type) || v.array_type == GgufType::BOOL)) {
    if (v.array_type == GgufType::BOOL) {
      put_items(*i, [](int64_t x) { return GgufValue{GgufType::BOOL, {}, x != 0}; });
    } else {
      put_items(*i, [](int64_t x) { return GgufValue{GgufType::I64, {}, x}; });
    }
  } else {
    fail("GGUF writer: metadata key '", key, "' (", describe(v), ") holds mismatched values");
  }
}

}  // namespace

void GgufWriter::write(const std::string& path) const {
  write(path, [this](size_t i, const Emit&) {
    fail("GGUF writer: tensor '", tensors_[i].name, "' was declared but has no producer");
  });
}

void GgufWriter::write(const std::string& path, const Producer& produce) const {
  if (!is_power_of_two(alignment_)) {
    fail("GGUF writer: alignment ", alignment_, " is not a power of two");
  }
  Sink out;
  out.bytes.insert(out.bytes.end(), {'G', 'G', 'U', 'F'});
  out.put<uint32_t>(3);
  out.put<uint64_t>(tensors_.size());
  const bool has_alignment_key = std::any_of(
      metadata_.begin(), metadata_.end(), [](const auto& kv) { return kv.first == kAlignmentKey; });
  const bool add_alignment_key = alignment_ != kDefaultAlignment && !has_alignment_key;
  out.put<uint64_t>(metadata_.size() + (add_alignment_key ? 1 : 0));
  if (add_alignment_key) {
    out.put_string(kAlignmentKey);
    out.put<uint32_t>(static_cast<uint32_t>(GgufType::U32));
    out.put<uint32_t>(alignment_);
  }
  for (const auto& [key, value] : metadata_) {
    if (key == kAlignmentKey && (!is_int(value.type) || int_of(key, value) != alignment_)) {
      fail("GGUF writer: metadata key '", key, "' disagrees with the writer's alignment ",
           alignment_);
    }
    out.put_string(key);
    out.put<uint32_t>(static_cast<uint32_t>(value.type));
    if (value.type == GgufType::ARRAY) {
      put_array(out, key, value);
    } else {
      put_scalar(out, key, value.type, value);
    }
  }
  uint64_t offset = 0;
  for (const Tensor& t : tensors_) {
    out.put_string(t.name);
    out.put<uint32_t>(static_cast<uint32_t>(t.ne.size()));
    for (int64_t n : t.ne) out.put<uint64_t>(static_cast<uint64_t>(n));
    out.put<uint32_t>(static_cast<uint32_t>(t.type));
    out.put<uint64_t>(offset);
    offset += (t.bytes + alignment_ - 1) / alignment_ * alignment_;
  }
  if (!tensors_.empty()) out.pad_to(alignment_);

  const std::string tmp = path + ".tmp";
  FILE* f = std::fopen(tmp.c_str(), "wb");
  if (f == nullptr) fail(tmp, ": cannot create: ", std::strerror(errno));
  int err = 0;
  auto put = [&](const void* data, size_t bytes) {
    if (err == 0 && std::fwrite(data, 1, bytes, f) != bytes) err = errno != 0 ? errno : EIO;
  };
  try {
    put(out.bytes.data(), out.bytes.size());
    static const uint8_t kZeros[64] = {};
    for (size_t i = 0; i < tensors_.size() && err == 0; ++i) {
      const Tensor& t = tensors_[i];
      if (!t.declared) {
        put(t.data.data(), t.data.size());
      } else {
        size_t written = 0;
        produce(i, [&](const void* data, size_t bytes) {
          written += bytes;
          if (written > t.bytes) {
            fail("GGUF writer: tensor '", t.name, "' got more than its ", t.bytes, " bytes");
          }
          put(data, bytes);
        });
        if (written != t.bytes) {
          fail("GGUF writer: tensor '", t.name, "' got ", written, " bytes, expected ", t.bytes);
        }
      }
      // Pad between tensors only, so the file ends exactly at the last tensor's data.
      size_t pad = i + 1 < tensors_.size() ? (alignment_ - t.bytes % alignment_) % alignment_ : 0;
      while (pad > 0) {
        const size_t n = std::min(pad, sizeof(kZeros));
        put(kZeros, n);
        pad -= n;
      }
    }
  } catch (...) {
    std::fclose(f);
    std::remove(tmp.c_str());
    throw;
  }
  if (std::fclose(f) != 0 && err == 0) err = errno != 0 ? errno : EIO;
  if (err == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err != 0) {
    std::remove(tmp.c_str());
    fail(path, ": write failed: ", std::strerror(err));
  }
}

}  // namespace k25
