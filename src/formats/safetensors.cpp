// Safetensors reader, directory loader and writer. Layout: u64 little-endian header length N, N
// bytes of JSON {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {...}}, then
// the data section; offsets are relative to its start. Nothing in the header is trusted.
#include "formats/safetensors.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/mapped_file.h"
#include "core/text_file.h"

namespace k25 {

namespace {

namespace fs = std::filesystem;
using nlohmann::json;

// The format's own readers refuse headers above 100 MB; real ones are a few hundred KB.
constexpr uint64_t kMaxHeaderBytes = 100'000'000;
constexpr int kMaxDims = 4;
constexpr char kMetadataKey[] = "__metadata__";
constexpr char kSingleFile[] = "model.safetensors";
constexpr char kIndexFile[] = "model.safetensors.index.json";

struct DtypeInfo {
  const char* name;
  DType type;
  uint64_t bytes;
};
constexpr DtypeInfo kDtypes[] = {
    {"F32", DType::F32, 4}, {"F16", DType::F16, 2}, {"BF16", DType::BF16, 2}};

const DtypeInfo* dtype_by_name(const std::string& name) {
  for (const DtypeInfo& d : kDtypes) {
    if (name == d.name) return &d;
  }
  return nullptr;
}

const DtypeInfo* dtype_by_type(DType type) {
  for (const DtypeInfo& d : kDtypes) {
    if (type == d.type) return &d;
  }
  return nullptr;
}

// Parses JSON, rejecting duplicate top-level keys (nlohmann would silently keep the last one)
// and nesting deeper than a header needs.
json parse_header_json(const char* begin, const char* end, const std::string& label) {
  std::set<std::string> keys;
  auto check = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth > 4) fail(label, ": header JSON is nested too deeply");
    if (event == json::parse_event_t::key && depth == 1 &&
        !keys.insert(parsed.get<std::string>()).second) {
      fail(label, ": header lists '", parsed.get<std::string>(), "' more than once");
    }
    return true;
  };
  try {
    return json::parse(begin, end, check);
  } catch (const json::exception& e) {
    fail(label, ": header is not valid JSON (", e.what(), ")");
  }
}

bool to_u64(const json& j, uint64_t* out) {
  if (!j.is_number_unsigned()) return false;
  *out = j.get<uint64_t>();
  return true;
}

struct Entry {
  TensorView view;
  uint64_t begin = 0;
};

Entry parse_entry(const std::string& label, const std::string& name, const json& j,
                  const uint8_t* data, uint64_t data_bytes) {
  auto bad = [&](const char* problem) -> void { fail(label, ": tensor '", name, "' ", problem); };
  if (!j.is_object()) bad("is not a JSON object");
  const auto dtype_it = j.find("dtype");
  const auto shape_it = j.find("shape");
  const auto offsets_it = j.find("data_offsets");
  if (dtype_it == j.end() || !dtype_it->is_string()) bad("has no string 'dtype'");
  if (shape_it == j.end() || !shape_it->is_array()) bad("has no array 'shape'");
  if (offsets_it == j.end() || !offsets_it->is_array() || offsets_it->size() != 2) {
    bad("has no two-element array 'data_offsets'");
  }
  const std::string dtype = dtype_it->get<std::string>();
  const DtypeInfo* info = dtype_by_name(dtype);
  if (info == nullptr) {
    fail(label, ": tensor '", name, "' has dtype ", dtype,
         ", which k25 does not support (supported: F32, F16, BF16)");
  }
  if (shape_it->size() > kMaxDims) {
    fail(label, ": tensor '", name, "' has ", shape_it->size(), " dimensions (k25 supports up to ",
         kMaxDims, ")");
  }
  Entry e;
  e.view.name = name;
  e.view.type = info->type;
  e.view.n_dims = static_cast<int>(shape_it->size());
  uint64_t elements = 1;
  for (size_t i = 0; i < shape_it->size(); ++i) {
    uint64_t dim = 0;
    if (!to_u64((*shape_it)[i], &dim) || dim == 0 ||
        dim > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad("has a shape entry that is not a positive integer");
    }
    if (__builtin_mul_overflow(elements, dim, &elements) ||
        elements > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
      bad("has too many elements (shape product overflows)");
    }
    e.view.ne[shape_it->size() - 1 - i] = static_cast<int64_t>(dim);
  }
  uint64_t begin = 0, end = 0, bytes = 0;
  if (!to_u64((*offsets_it)[0], &begin) || !to_u64((*offsets_it)[1], &end) || begin > end) {
    bad("has invalid data_offsets");
  }
  if (__builtin_mul_overflow(elements, info->bytes, &bytes) || end - begin != bytes) {
    fail(label, ": tensor '", name, "' data_offsets span ", end - begin,
         " bytes but its shape and ", dtype, " need ", elements, " x ", info->bytes);
  }
  if (end > data_bytes) {
    fail(label, ": tensor '", name, "' (bytes ", begin, "..", end,
         ") extends past the end of the file (data section holds ", data_bytes,
         " bytes; truncated file?)");
  }
  e.view.bytes = bytes;
  e.view.data = data + begin;
  e.begin = begin;
  return e;
}

}  // namespace

std::unique_ptr<SafetensorsFile> SafetensorsFile::parse(const uint8_t* data, size_t size,
                                                        std::string label) {
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->label_ = std::move(label);
  const std::string& name = file->label_;
  if (size < 8) fail(name, ": file is shorter than the 8-byte header length (truncated file)");
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, data, 8);
  if (header_bytes > kMaxHeaderBytes) {
    fail(name, ": header length ", header_bytes, " exceeds the 100 MB limit (not a safetensors ",
         "file?)");
  }
  if (header_bytes > size - 8) {
    fail(name, ": header length ", header_bytes, " is larger than the rest of the file (", size - 8,
         " bytes; truncated file)");
  }
  const char* text = reinterpret_cast<const char*>(data + 8);
  const json header = parse_header_json(text, text + header_bytes, name);
  if (!header.is_object()) fail(name, ": header is not a JSON object");
  const uint8_t* section = data + 8 + header_bytes;
  const uint64_t section_bytes = size - 8 - header_bytes;

  std::vector<Entry> entries;
  for (const auto& [key, value] : header.items()) {
    if (key == kMetadataKey) {
      if (!value.is_object()) fail(name, ": '", kMetadataKey, "' is not a JSON object");
      for (const auto& [mkey, mvalue] : value.items()) {
        if (!mvalue.is_string()) {
          fail(name, ": metadata entry '", mkey, "' is not a string");
        }
        file->metadata_[mkey] = mvalue.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(name, key, value, section, section_bytes));
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  for (size_t i = 1; i < entries.size(); ++i) {
    const Entry& prev = entries[i - 1];
    if (prev.begin + prev.view.bytes > entries[i].begin) {
      fail(name, ": tensors '", prev.view.name, "' and '", entries[i].view.name,
           "' overlap in the data section");
    }
  }
  file->tensors_.reserve(entries.size());
  for (Entry& e : entries) file->tensors_.push_back(std::move(e.view));
  return file;
}

std::unique_ptr<SafetensorsFile> SafetensorsFile::open(const std::string& path) {
  std::unique_ptr<MappedFile> mapping = MappedFile::open(path, "safetensors file");
  std::unique_ptr<SafetensorsFile> file = parse(mapping->data(), mapping->size(), path);
  file->mapping_ = std::move(mapping);
  for (TensorView& t : file->tensors_) t.file = file->mapping_.get();
  return file;
}

SafetensorsFile::~SafetensorsFile() = default;

const TensorView* SafetensorsFile::tensor(std::string_view name) const {
  for (const TensorView& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

// ---- Directory ----

namespace {

json read_json_file(const std::string& path) {
  const std::string s = read_text_file(path, "model directory");
  return parse_header_json(s.data(), s.data() + s.size(), path);
}

// Shard names come from an untrusted file: keep them inside the model directory.
bool plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

}  // namespace

std::unique_ptr<SafetensorsSet> SafetensorsSet::open_dir(const std::string& dir) {
  std::unique_ptr<SafetensorsSet> set(new SafetensorsSet());
  set->dir_ = dir;
  const fs::path root(dir);
  const std::string index_path = (root / kIndexFile).string();
  if (!fs::exists(index_path)) {
    const std::string single = (root / kSingleFile).string();
    if (!fs::exists(single)) fail(dir, ": no ", kSingleFile, " or ", kIndexFile, " found");
    set->files_.push_back(SafetensorsFile::open(single));
    for (const TensorView& t : set->files_.back()->tensors()) set->by_name_[t.name] = &t;
    return set;
  }
  const json index = read_json_file(index_path);
  const auto map_it = index.is_object() ? index.find("weight_map") : index.end();
  if (map_it == index.end() || !map_it->is_object()) {
    fail(index_path, ": has no 'weight_map' object");
  }
  std::map<std::string, const SafetensorsFile*> shards;
  for (const auto& [tensor, shard_json] : map_it->items()) {
    if (!shard_json.is_string() || !plain_file_name(shard_json.get<std::string>())) {
      fail(index_path, ": tensor '", tensor, "' maps to an invalid shard file name");
    }
    const std::string shard = shard_json.get<std::string>();
    auto it = shards.find(shard);
    if (it == shards.end()) {
      const std::string shard_path = (root / shard).string();
      if (!fs::exists(shard_path)) {
        fail(index_path, ": shard '", shard, "' (listed for tensor '", tensor,
             "') does not exist in ", dir);
      }
      set->files_.push_back(SafetensorsFile::open(shard_path));
      it = shards.emplace(shard, set->files_.back().get()).first;
    }
    const TensorView* view = it->second->tensor(tensor);
    if (view == nullptr) {
      fail(index_path, ": tensor '", tensor, "' is listed in shard '", shard,
           "' but that shard does not contain it");
    }
    set->by_name_[tensor] = view;
  }
  return set;
}

const TensorView* SafetensorsSet::tensor(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? nullptr : it->second;
}

const TensorView& SafetensorsSet::require(std::string_view name) const {
  const TensorView* t = tensor(name);
  if (t == nullptr) fail(dir_, ": tensor '", name, "' not found in the safetensors weights");
  return *t;
}

std::vector<const TensorView*> SafetensorsSet::tensors() const {
  std::vector<const TensorView*> out;
  out.reserve(by_name_.size());
  for (const auto& [name, view] : by_name_) out.push_back(view);
  return out;
}

// ---- Writer ----

void write_safetensors(const std::string& path, const std::vector<SafetensorsTensor>& tensors,
                       const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  std::set<std::string> names;
  uint64_t offset = 0;
  for (const SafetensorsTensor& t : tensors) {
    const DtypeInfo* info = dtype_by_type(t.type);
    if (info == nullptr) {
      fail(path, ": tensor '", t.name, "' has type ", dtype_name(t.type),
           ", which safetensors files written by k25 cannot hold (F32, F16, BF16 only)");
    }
    if (t.name == kMetadataKey || !names.insert(t.name).second) {
      fail(path, ": tensor name '", t.name, "' is reserved or used twice");
    }
    if (t.shape.size() > kMaxDims) fail(path, ": tensor '", t.name, "' has more than 4 dims");
    uint64_t bytes = info->bytes;
    for (int64_t d : t.shape) {
      if (d <= 0 || __builtin_mul_overflow(bytes, static_cast<uint64_t>(d), &bytes)) {
        fail(path, ": tensor '", t.name, "' has an invalid shape");
      }
    }
    if (bytes != t.bytes || t.data == nullptr) {
      fail(path, ": tensor '", t.name, "' has ", t.bytes, " bytes of data, its shape needs ",
           bytes);
    }
    header[t.name] = {
        {"dtype", info->name}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  if (!metadata.empty()) header[kMetadataKey] = metadata;
  std::string text;
  try {
    text = header.dump();
  } catch (const json::exception& e) {
    fail(path, ": cannot encode the header (", e.what(), ")");
  }
  // Readers may map tensors in place, so start the data section on an 8-byte boundary.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t header_bytes = text.size();

  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) fail(path, ": cannot create: ", std::strerror(errno));
  bool ok = std::fwrite(&header_bytes, 8, 1, f) == 1 &&
            std::fwrite(text.data(), 1, text.size(), f) == text.size();
  for (size_t i = 0; ok && i < tensors.size(); ++i) {
    ok = std::fwrite(tensors[i].data, 1, tensors[i].bytes, f) == tensors[i].bytes;
  }
  const int err = errno;
  if (std::fclose(f) != 0) ok = false;
  if (!ok) fail(path, ": write failed: ", std::strerror(err));
}

}  // namespace k25
