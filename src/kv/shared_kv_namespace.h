// The namespace of the shared KV tier's keys: two replicas read each other's pages only when
// their KV rows are bitwise the same for the same tokens. It is a 64-bit hash (16 hex digits) of
//  - the model weights' content: weights_content_hash() over the whole model file (not its path
//    or mtime, which differ between machines holding the same file),
//  - the KV element type (f32 / f16) and geometry (layers, KV width, page tokens: the prefix
//    cache's root key) and the model's shape (vocabulary, width, heads),
//  - the kernel-set identity: the instruction sets this build was compiled for (the kernels are
//    chosen at compile time, -march) and the compiler version, since a different set or compiler
//    may round differently (FMA contraction, summation order).
// Any difference gives another namespace; pages of other namespaces are never even looked up.
#pragma once

#include <cstdint>
#include <string>

namespace k25 {

// A 64-bit hash of a file's bytes (CRC-32C per MiB, mixed by position). Throws k25::Error when the
// file cannot be read.
uint64_t weights_content_hash(const std::string& path);
// The active kernel set and the compiler, "avx512/12.2.0" and the like: pages computed by
// different kernels differ in their last bits, so replicas share pages only when both match.
std::string kernel_set_identity();
struct SharedKvIdentity {
  uint64_t weights_hash = 0;
  uint64_t geometry_seed = 0;  // the prefix cache's root key
  int kv_dtype = 0;            // KvDtype's value
  int n_vocab = 0, dim = 0, n_heads = 0;
};
std::string shared_kv_namespace(const SharedKvIdentity& identity);

}  // namespace k25
