// GGUF reader/writer: round trips, the shared reference files, and every class of corrupt input
// the reader must reject with a k25::Error (never a crash).
#include "formats/gguf.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "parse_error.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

std::string shared_dir() {
  return K25_SHARED_DIR;
}

#define SKIP_WITHOUT(path)                                             \
  if (!fs::exists(path)) {                                             \
    GTEST_SKIP() << "*** SKIPPED: shared reference file " << (path)    \
                 << " is missing (expected under K25_SHARED_DIR) ***"; \
  }

// A temporary file path removed at scope exit.
class TempPath {
 public:
  explicit TempPath(const std::string& stem)
      : path_((fs::temp_directory_path() /
               (stem + "-" + std::to_string(getpid()) + "-" + std::to_string(counter_++)))
                  .string()) {}
  ~TempPath() { fs::remove(path_); }
  const std::string& str() const { return path_; }

 private:
  static inline int counter_ = 0;
  std::string path_;
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

// Hand-assembles GGUF images field by field so each test can corrupt exactly one thing.
class Image {
 public:
  Image& u32(uint32_t v) { return raw(&v, 4); }
  Image& u64(uint64_t v) { return raw(&v, 8); }
  Image& str(const std::string& s) {
    u64(s.size());
    return raw(s.data(), s.size());
  }
  Image& header(uint64_t tensors, uint64_t kvs, uint32_t version = 3) {
    raw("GGUF", 4);
    u32(version);
    u64(tensors);
    return u64(kvs);
  }
  Image& kv_u32(const std::string& key, uint32_t v) {
    str(key);
    u32(static_cast<uint32_t>(GgufType::U32));
    return u32(v);
  }
  Image& tensor_info(const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                     uint64_t offset) {
    str(name);
    u32(static_cast<uint32_t>(ne.size()));
    for (uint64_t n : ne) u64(n);
    u32(type);
    return u64(offset);
  }
  Image& pad(size_t alignment) {
    while (bytes.size() % alignment != 0) bytes.push_back(0);
    return *this;
  }
  Image& zeros(size_t n) {
    bytes.insert(bytes.end(), n, 0);
    return *this;
  }
  Image& raw(const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return *this;
  }
  std::vector<uint8_t> bytes;
};

std::unique_ptr<GgufFile> parse(const std::vector<uint8_t>& bytes) {
  return GgufFile::parse(bytes.data(), bytes.size(), "test.gguf");
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return testing::parse_error<GgufFile>(bytes, "test.gguf");
}

// A small valid file with two F32 tensors and a Q8_0 tensor, made by the writer.
std::vector<uint8_t> small_file(uint32_t alignment = 32) {
  GgufWriter w(alignment);
  w.set_string("general.architecture", "llama");
  w.set_u32("llama.block_count", 2);
  w.set_string_array("tokenizer.ggml.tokens", {"<unk>", "a", "b"});
  std::vector<float> a(6), b(3);
  for (size_t i = 0; i < a.size(); ++i) a[i] = static_cast<float>(i);
  for (size_t i = 0; i < b.size(); ++i) b[i] = -static_cast<float>(i);
  std::vector<uint8_t> q(34 * 2, 7);
  w.add_tensor("a", DType::F32, {3, 2}, a.data(), a.size() * 4);
  w.add_tensor("b", DType::F32, {3}, b.data(), b.size() * 4);
  w.add_tensor("q", DType::Q8_0, {64}, q.data(), q.size());
  TempPath path("gguf-small");
  w.write(path.str());
  return read_all(path.str());
}

TEST(GgufTensor, DtypeNames) {
  EXPECT_STREQ(dtype_name(DType::F32), "F32");
  EXPECT_STREQ(dtype_name(DType::F16), "F16");
  EXPECT_STREQ(dtype_name(DType::BF16), "BF16");
  EXPECT_STREQ(dtype_name(DType::Q8_0), "Q8_0");
  EXPECT_STREQ(dtype_name(DType::Q4_0), "Q4_0");
}

TEST(GgufWriter, RoundTripsMetadataAndTensors) {
  GgufWriter w;
  w.set_string("general.name", "tiny");
  w.set_u32("llama.block_count", 5);
  w.set_i32("some.negative", -7);
  w.set_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w.set_bool("flag", true);
  w.set_string_array("tokens", {"<s>", "", "hello world"});
  w.set_f32_array("scores", {0.5, -1.25});
  w.set_i32_array("types", {1, 2, -3});
  w.set("big", GgufValue{GgufType::U64, GgufType::U32, uint64_t{1} << 63});
  w.set_u32("llama.block_count", 6);  // set replaces
  std::vector<float> f32(4 * 3);
  for (size_t i = 0; i < f32.size(); ++i) f32[i] = 0.5f * static_cast<float>(i);
  std::vector<uint16_t> f16(8, 0x3c00), bf16(2 * 2 * 2 * 2, 0x3f80);
  std::vector<uint8_t> q4(18 * 2, 0x11);
  w.add_tensor("w.f32", DType::F32, {4, 3}, f32.data(), f32.size() * 4);
  w.add_tensor("w.f16", DType::F16, {8}, f16.data(), f16.size() * 2);
  w.add_tensor("w.bf16", DType::BF16, {2, 2, 2, 2}, bf16.data(), bf16.size() * 2);
  w.add_tensor("w.q4", DType::Q4_0, {32, 2}, q4.data(), q4.size());
  TempPath path("gguf-roundtrip");
  w.write(path.str());

  auto f = GgufFile::open(path.str());
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->path(), path.str());
  EXPECT_EQ(f->get_string("general.name"), "tiny");
  EXPECT_EQ(f->get_int("llama.block_count"), 6);
  EXPECT_EQ(f->get_int("some.negative"), -7);
  EXPECT_FLOAT_EQ(static_cast<float>(f->get_float("llama.attention.layer_norm_rms_epsilon")),
                  1e-5f);
  EXPECT_DOUBLE_EQ(f->get_float("llama.block_count"), 6.0);
  EXPECT_TRUE(f->get_bool("flag"));
  EXPECT_EQ(f->get_string_array("tokens"), (std::vector<std::string>{"<s>", "", "hello world"}));
  EXPECT_EQ(f->get_float_array("scores"), (std::vector<double>{0.5, -1.25}));
  EXPECT_EQ(f->get_int_array("types"), (std::vector<int64_t>{1, 2, -3}));
  EXPECT_EQ(f->get_float_array("types"), (std::vector<double>{1, 2, -3}));
  EXPECT_EQ(std::get<uint64_t>(f->find("big")->value), uint64_t{1} << 63);
  EXPECT_FALSE(f->has("general.alignment"));  // default alignment is not written
  EXPECT_EQ(f->metadata().size(), 9u);

  ASSERT_EQ(f->tensors().size(), 4u);
  const TensorView* t = f->tensor("w.f32");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->type, DType::F32);
  EXPECT_EQ(t->n_dims, 2);
  EXPECT_EQ(t->ne[0], 4);
  EXPECT_EQ(t->ne[1], 3);
  EXPECT_EQ(t->n_rows(), 3);
  EXPECT_EQ(t->bytes, f32.size() * 4);
  EXPECT_EQ(std::memcmp(t->data, f32.data(), t->bytes), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data) % 32, 0u);
  const TensorView* bf = f->tensor("w.bf16");
  ASSERT_NE(bf, nullptr);
  EXPECT_EQ(bf->n_dims, 4);
  EXPECT_EQ(bf->n_elements(), 16);
  EXPECT_EQ(std::memcmp(bf->data, bf16.data(), bf->bytes), 0);
  const TensorView* q = f->tensor("w.q4");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->type, DType::Q4_0);
  EXPECT_EQ(q->bytes, 36u);
  EXPECT_EQ(std::memcmp(q->data, q4.data(), q->bytes), 0);
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

TEST(GgufWriter, WritesNonDefaultAlignment) {
  auto bytes = small_file(64);
  auto f = parse(bytes);
  EXPECT_EQ(f->get_int("general.alignment"), 64);
  for (const TensorView& t : f->tensors()) {
    EXPECT_EQ((static_cast<const uint8_t*>(t.data) - bytes.data()) % 64, 0) << t.name;
  }
  EXPECT_EQ(std::memcmp(f->tensor("q")->data, std::vector<uint8_t>(68, 7).data(), 68), 0);
}

TEST(GgufWriter, RejectsBadTensors) {
  GgufWriter w;
  float x[4] = {};
  EXPECT_THROW(w.add_tensor("x", DType::F32, {4}, x, 12), Error);    // wrong byte count
  EXPECT_THROW(w.add_tensor("x", DType::Q8_0, {16}, x, 16), Error);  // partial block
  EXPECT_THROW(w.add_tensor("x", DType::F32, {}, x, 16), Error);     // no dims
  EXPECT_THROW(w.add_tensor("x", DType::F32, {4, 0}, x, 0), Error);  // zero dim
  w.add_tensor("x", DType::F32, {4}, x, 16);
  EXPECT_THROW(w.add_tensor("x", DType::F32, {4}, x, 16), Error);  // duplicate
  GgufWriter odd(24);
  TempPath path("gguf-odd");
  EXPECT_THROW(odd.write(path.str()), Error);
}

TEST(GgufGetters, ReportMissingKeysAndWrongTypes) {
  auto f = parse(small_file());
  try {
    f->get_int("llama.embedding_length");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "test.gguf: metadata key 'llama.embedding_length' is missing");
  }
  try {
    f->get_int("general.architecture");
    FAIL();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "test.gguf: metadata key 'general.architecture' has type string, expected an "
                 "integer");
  }
  EXPECT_THROW(f->get_string("llama.block_count"), Error);
  EXPECT_THROW(f->get_bool("llama.block_count"), Error);
  EXPECT_THROW(f->get_float("general.architecture"), Error);
  EXPECT_THROW(f->get_int_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(f->get_float_array("tokenizer.ggml.tokens"), Error);
  EXPECT_THROW(f->get_string_array("llama.block_count"), Error);
  EXPECT_EQ(f->get_int_or("llama.embedding_length", 64), 64);
  EXPECT_EQ(f->get_string_or("x", "fallback"), "fallback");
  EXPECT_DOUBLE_EQ(f->get_float_or("x", 2.5), 2.5);
  EXPECT_TRUE(f->get_bool_or("x", true));
  EXPECT_EQ(f->get_int_or("llama.block_count", 64), 2);
  EXPECT_THROW(f->get_int_or("general.architecture", 1), Error);
}

TEST(GgufOpen, ReportsMissingAndEmptyFiles) {
  try {
    GgufFile::open("/nonexistent/model.gguf");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/model.gguf: cannot open"),
              std::string::npos);
  }
  TempPath empty("gguf-empty");
  std::ofstream(empty.str()).close();
  EXPECT_THROW(GgufFile::open(empty.str()), Error);
}

TEST(GgufShared, ReadsStories260K) {
  const std::string path = shared_dir() + "/models/stories260K.gguf";
  SKIP_WITHOUT(path);
  auto f = GgufFile::open(path);
  EXPECT_EQ(f->version(), 3u);
  EXPECT_EQ(f->get_string("general.architecture"), "llama");
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
  EXPECT_EQ(f->get_int("llama.embedding_length"), 64);
  EXPECT_EQ(f->get_int("llama.feed_forward_length"), 172);
  EXPECT_EQ(f->get_int("llama.attention.head_count"), 8);
  EXPECT_EQ(f->get_int("llama.attention.head_count_kv"), 4);
  EXPECT_NEAR(f->get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-9);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens").size(), 512u);
  EXPECT_EQ(f->get_string_array("tokenizer.ggml.tokens")[1], "<s>");
  // token_embd + output_norm + output + 9 per block (attention 4 + norms 2 + ffn 3).
  EXPECT_EQ(f->tensors().size(), 3u + 9u * 5u);
  const TensorView* emb = f->tensor("token_embd.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 64);
  EXPECT_EQ(emb->ne[1], 512);
  EXPECT_EQ(emb->bytes, 64u * 512u * 4u);
}

TEST(GgufShared, ReadsQuantizedStories260K) {
  const std::string path = shared_dir() + "/models/stories260K-q8_0.gguf";
  SKIP_WITHOUT(path);
  auto f = GgufFile::open(path);
  bool has_q8 = false, has_f16 = false;
  for (const TensorView& t : f->tensors()) {
    has_q8 |= t.type == DType::Q8_0;
    has_f16 |= t.type == DType::F16;
    if (t.type == DType::Q8_0) {
      EXPECT_EQ(t.bytes, static_cast<size_t>(t.n_elements() / 32 * 34)) << t.name;
    }
  }
  EXPECT_TRUE(has_q8);
  EXPECT_TRUE(has_f16);
  EXPECT_EQ(f->get_int("llama.block_count"), 5);
}

TEST(GgufShared, ReadsVocabOnlyFiles) {
  const std::string dir = shared_dir() + "/tokenizers/llamacpp-vocab";
  SKIP_WITHOUT(dir + "/ggml-vocab-qwen2.gguf");
  auto qwen = GgufFile::open(dir + "/ggml-vocab-qwen2.gguf");
  EXPECT_TRUE(qwen->tensors().empty());
  EXPECT_EQ(qwen->get_string_array("tokenizer.ggml.tokens").size(), 151936u);
  EXPECT_EQ(qwen->get_string("tokenizer.ggml.model"), "gpt2");
  for (const char* name :
       {"ggml-vocab-gpt-2.gguf", "ggml-vocab-llama-bpe.gguf", "ggml-vocab-llama-spm.gguf"}) {
    auto f = GgufFile::open(dir + "/" + name);
    EXPECT_TRUE(f->tensors().empty()) << name;
    EXPECT_FALSE(f->get_string_array("tokenizer.ggml.tokens").empty()) << name;
  }
}

// ---- corrupt input ----

TEST(GgufCorrupt, EveryTruncationThrows) {
  const auto bytes = small_file();
  // The data section ends the file, so every proper prefix is missing some bytes.
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(parse(prefix), Error) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(parse(bytes));
}

TEST(GgufCorrupt, WrongMagic) {
  auto bytes = small_file();
  bytes[0] = 'X';
  EXPECT_NE(parse_error(bytes).find("not a GGUF file"), std::string::npos);
}

TEST(GgufCorrupt, Versions) {
  EXPECT_NE(parse_error(Image().header(0, 0, 1).bytes).find("version 1 is not supported"),
            std::string::npos);
  EXPECT_NE(parse_error(Image().header(0, 0, 4).bytes).find("unsupported GGUF version 4"),
            std::string::npos);
  EXPECT_EQ(parse(Image().header(0, 0, 2).bytes)->version(), 2u);
  EXPECT_NE(parse_error(Image().header(0, 0, 0x03000000).bytes).find("big-endian"),
            std::string::npos);
}

TEST(GgufCorrupt, HugeCounts) {
  EXPECT_NE(
      parse_error(Image().header(0, uint64_t{1} << 60).zeros(64).bytes).find("metadata count"),
      std::string::npos);
  EXPECT_NE(parse_error(Image().header(~uint64_t{0}, 0).zeros(64).bytes).find("tensor count"),
            std::string::npos);
  Image long_key;
  long_key.header(0, 1).u64(uint64_t{1} << 62).zeros(16);
  EXPECT_NE(parse_error(long_key.bytes).find("metadata key claims"), std::string::npos);
  Image long_array;
  long_array.header(0, 1).str("arr").u32(static_cast<uint32_t>(GgufType::ARRAY));
  long_array.u32(static_cast<uint32_t>(GgufType::U32)).u64(uint64_t{1} << 61).zeros(16);
  EXPECT_NE(parse_error(long_array.bytes).find("array length"), std::string::npos);
  Image string_array;
  string_array.header(0, 1).str("arr").u32(static_cast<uint32_t>(GgufType::ARRAY));
  string_array.u32(static_cast<uint32_t>(GgufType::STRING)).u64(3).str("a").u64(1000).zeros(16);
  EXPECT_NE(parse_error(string_array.bytes).find("array string claims 1000 bytes"),
            std::string::npos);
}

TEST(GgufCorrupt, BadMetadata) {
  Image dup;
  dup.header(0, 2).kv_u32("k", 1).kv_u32("k", 2);
  EXPECT_NE(parse_error(dup.bytes).find("metadata key 'k' appears more than once"),
            std::string::npos);
  Image unknown;
  unknown.header(0, 1).str("k").u32(13).u32(0);
  EXPECT_NE(parse_error(unknown.bytes).find("unknown type id 13"), std::string::npos);
  Image nested;
  nested.header(0, 1).str("k").u32(static_cast<uint32_t>(GgufType::ARRAY));
  nested.u32(static_cast<uint32_t>(GgufType::ARRAY)).u64(0);
  EXPECT_NE(parse_error(nested.bytes).find("nested array"), std::string::npos);
  for (uint32_t alignment : {0u, 24u}) {
    Image bad_align;
    bad_align.header(0, 1).kv_u32("general.alignment", alignment);
    EXPECT_NE(parse_error(bad_align.bytes).find("power of two"), std::string::npos);
  }
  Image string_align;
  string_align.header(0, 1).str("general.alignment");
  string_align.u32(static_cast<uint32_t>(GgufType::STRING)).str("32");
  EXPECT_NE(parse_error(string_align.bytes).find("expected an integer"), std::string::npos);
}

// One F32 tensor info header; the data section follows at the next multiple of 32.
Image one_tensor(std::vector<uint64_t> ne, uint32_t type, uint64_t offset) {
  Image img;
  img.header(1, 0).tensor_info("blk.0.attn_q.weight", std::move(ne), type, offset).pad(32);
  return img;
}

TEST(GgufCorrupt, UnsupportedTensorType) {
  EXPECT_EQ(parse_error(one_tensor({256}, 16, 0).zeros(144).bytes),
            "test.gguf: tensor 'blk.0.attn_q.weight' has type IQ2_XXS (16), which k25 does not "
            "support (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, "
            "Q5_K, Q6_K, IQ4_NL, IQ4_XS)");
  EXPECT_NE(parse_error(one_tensor({256}, 39, 0).zeros(144).bytes).find("MXFP4 (39)"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({4}, 999, 0).zeros(64).bytes).find("unknown (999)"),
            std::string::npos);
}

// A K-quant tensor's data must be exactly its super-blocks: 256 elements of Q4_K are 144 bytes.
TEST(GgufCorrupt, KQuantTensorSizeFollowsItsShape) {
  const std::vector<uint8_t> ok = one_tensor({256}, 12, 0).zeros(144).bytes;
  EXPECT_NO_THROW(GgufFile::parse(ok.data(), ok.size(), "test.gguf"));
  EXPECT_NE(parse_error(one_tensor({512}, 12, 0).zeros(144).bytes).find("extends past the end"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({128}, 12, 0).zeros(144).bytes).find("not a multiple"),
            std::string::npos);
}

TEST(GgufCorrupt, BadShapes) {
  EXPECT_NE(parse_error(one_tensor({}, 0, 0).zeros(64).bytes).find("0 dimensions"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({1, 1, 1, 1, 1}, 0, 0).zeros(64).bytes).find("5 dimensions"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({4, 0}, 0, 0).zeros(64).bytes).find("invalid dimension 1"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({~uint64_t{0}}, 0, 0).zeros(64).bytes).find("invalid dimension"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({uint64_t{1} << 32, uint64_t{1} << 32}, 0, 0).zeros(64).bytes)
                .find("overflows"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({48}, 8, 0).zeros(128).bytes).find("not a multiple"),
            std::string::npos);
}

TEST(GgufCorrupt, TensorOutOfRange) {
  EXPECT_NE(parse_error(one_tensor({16}, 0, 0).zeros(60).bytes).find("extends past the end"),
            std::string::npos);
  EXPECT_NE(parse_error(one_tensor({16}, 0, ~uint64_t{0} - 31).zeros(64).bytes)
                .find("extends past the end"),
            std::string::npos);
  // Tensor infos that end after the file does (no room for the data section at all).
  Image no_data;
  no_data.header(1, 0).tensor_info("t", {1}, 0, 0);
  EXPECT_NE(parse_error(no_data.bytes).find("data section would start"), std::string::npos);
}

TEST(GgufCorrupt, MisalignedOffset) {
  EXPECT_NE(parse_error(one_tensor({4}, 0, 4).zeros(64).bytes)
                .find("not a multiple of the "
                      "alignment 32"),
            std::string::npos);
}

TEST(GgufCorrupt, OverlappingTensors) {
  Image img;
  img.header(2, 0).tensor_info("a", {16}, 0, 32).tensor_info("b", {16}, 0, 0).pad(32).zeros(96);
  EXPECT_NE(parse_error(img.bytes).find("tensors 'b' and 'a' overlap"), std::string::npos);
  Image ok;
  ok.header(2, 0).tensor_info("a", {8}, 0, 32).tensor_info("b", {8}, 0, 0).pad(32).zeros(64);
  EXPECT_EQ(parse(ok.bytes)->tensors().size(), 2u);
}

TEST(GgufCorrupt, DuplicateTensorNames) {
  Image img;
  img.header(2, 0).tensor_info("a", {8}, 0, 0).tensor_info("a", {8}, 0, 32).pad(32).zeros(64);
  EXPECT_NE(parse_error(img.bytes).find("tensor 'a' appears more than once"), std::string::npos);
}

TEST(GgufCorrupt, RandomByteFlipsNeverCrash) {
  const auto good = small_file();
  uint32_t state = 12345;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = good;
    for (int k = 0; k < 3; ++k) {
      state = state * 1664525u + 1013904223u;
      bytes[(state >> 8) % bytes.size()] ^= static_cast<uint8_t>(1u << (state % 8));
    }
    try {
      auto f = parse(bytes);
      for (const TensorView& t : f->tensors()) {
        ASSERT_GE(static_cast<const uint8_t*>(t.data), bytes.data());
        ASSERT_LE(static_cast<const uint8_t*>(t.data) + t.bytes, bytes.data() + bytes.size());
      }
    } catch (const Error&) {
    }
  }
}

}  // namespace
}  // namespace k25
