#include "kv/shared_kv_namespace.h"

#include <algorithm>
#include <cstdio>
#include <initializer_list>

#include "core/crc32c.h"
#include "core/mapped_file.h"
#include "kernels/kernel_table.h"
#include "kernels/kv_dtype.h"

namespace k25 {

namespace {

uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  h *= 0xff51afd7ed558ccdull;
  return h ^ (h >> 33);
}

}  // namespace

uint64_t weights_content_hash(const std::string& path) {
  const auto file = MappedFile::open(path, "model file");
  constexpr size_t kChunk = size_t{1} << 20;
  uint64_t h = mix(0, file->size());
  for (size_t at = 0; at < file->size(); at += kChunk) {
    const size_t n = std::min(kChunk, file->size() - at);
    h = mix(h, (static_cast<uint64_t>(at) << 32) | crc32c(file->data() + at, n));
  }
  return h;
}

std::string kernel_set_identity() {
  return std::string(kernels().isa) + "/" + __VERSION__;
}

std::string shared_kv_namespace(const SharedKvIdentity& id) {
  const std::string kernels = kernel_set_identity();
  uint64_t h = mix(0, id.weights_hash);
  for (uint64_t v : std::initializer_list<uint64_t>{
           id.geometry_seed, static_cast<uint64_t>(id.kv_dtype), static_cast<uint64_t>(id.n_vocab),
           static_cast<uint64_t>(id.dim), static_cast<uint64_t>(id.n_heads), kKeyLayoutVersion,
           uint64_t{crc32c(kernels.data(), kernels.size())}}) {
    h = mix(h, v);
  }
  char hex[17];
  std::snprintf(hex, sizeof(hex), "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace k25
