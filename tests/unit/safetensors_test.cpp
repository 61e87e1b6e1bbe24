// Safetensors reader/writer/directory loader: round trips, sharded directories, and corrupt input
// that must be rejected with a k25::Error naming the problem.
#include "formats/safetensors.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/mapped_file.h"
#include "parse_error.h"

namespace k25 {
namespace {

namespace fs = std::filesystem;

// A fresh temporary directory removed (with its contents) at scope exit.
class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("safetensors-test-" + std::to_string(getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }
  std::string str() const { return path_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path path_;
};

std::vector<uint8_t> read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>(std::istreambuf_iterator<char>(in), {});
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// An image with the given header text followed by `data_bytes` zero bytes.
std::vector<uint8_t> image(const std::string& header, size_t data_bytes) {
  std::vector<uint8_t> bytes(8 + header.size() + data_bytes, 0);
  const uint64_t n = header.size();
  std::memcpy(bytes.data(), &n, 8);
  std::copy(header.begin(), header.end(), bytes.begin() + 8);
  return bytes;
}

std::unique_ptr<SafetensorsFile> parse(const std::vector<uint8_t>& bytes) {
  return SafetensorsFile::parse(bytes.data(), bytes.size(), "test.safetensors");
}

std::string parse_error(const std::vector<uint8_t>& bytes) {
  return testing::parse_error<SafetensorsFile>(bytes, "test.safetensors");
}

#define EXPECT_ERROR_HAS(bytes, text) \
  EXPECT_NE(parse_error(bytes).find(text), std::string::npos) << parse_error(bytes)

struct Sample {
  std::vector<float> f32 = {1, 2, 3, 4, 5, 6};
  std::vector<uint16_t> f16 = {0x3c00, 0x4000, 0x4200};
  std::vector<uint16_t> bf16 = {0x3f80, 0x4000, 0x4040, 0x4080};
  std::vector<SafetensorsTensor> tensors() const {
    return {{"model.embed.weight", DType::F32, {2, 3}, f32.data(), f32.size() * 4},
            {"model.norm.weight", DType::F16, {3}, f16.data(), f16.size() * 2},
            {"lm_head.weight", DType::BF16, {1, 2, 2}, bf16.data(), bf16.size() * 2}};
  }
};

TEST(SafetensorsFile, RoundTrip) {
  TempDir dir;
  Sample s;
  write_safetensors(dir.file("m.safetensors"), s.tensors(), {{"format", "pt"}});
  const auto bytes = read_all(dir.file("m.safetensors"));
  uint64_t header_bytes = 0;
  std::memcpy(&header_bytes, bytes.data(), 8);
  EXPECT_EQ((8 + header_bytes) % 8, 0u);

  auto f = SafetensorsFile::open(dir.file("m.safetensors"));
  EXPECT_EQ(f->path(), dir.file("m.safetensors"));
  EXPECT_EQ(f->metadata().at("format"), "pt");
  ASSERT_EQ(f->tensors().size(), 3u);
  EXPECT_EQ(f->tensors()[0].name, "model.embed.weight");  // data order
  const TensorView* emb = f->tensor("model.embed.weight");
  ASSERT_NE(emb, nullptr);
  EXPECT_EQ(emb->type, DType::F32);
  EXPECT_EQ(emb->n_dims, 2);
  EXPECT_EQ(emb->ne[0], 3);  // columns
  EXPECT_EQ(emb->ne[1], 2);  // rows
  EXPECT_EQ(emb->bytes, 24u);
  EXPECT_EQ(std::memcmp(emb->data, s.f32.data(), 24), 0);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(emb->data) % 8, 0u);
  // Row lookups read the file through the mapping's fd (MappedFile::read) and get the same bytes.
  ASSERT_NE(emb->file, nullptr);
  float row[3];
  emb->file->read(static_cast<const uint8_t*>(emb->data) + 12, sizeof(row), row);
  EXPECT_EQ(std::memcmp(row, s.f32.data() + 3, sizeof(row)), 0);
  const TensorView* head = f->tensor("lm_head.weight");
  ASSERT_NE(head, nullptr);
  EXPECT_EQ(head->type, DType::BF16);
  EXPECT_EQ(head->n_dims, 3);
  EXPECT_EQ(head->ne[0], 2);
  EXPECT_EQ(head->ne[1], 2);
  EXPECT_EQ(head->ne[2], 1);
  EXPECT_EQ(std::memcmp(head->data, s.bf16.data(), 8), 0);
  const TensorView* norm = f->tensor("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->type, DType::F16);
  EXPECT_EQ(norm->n_dims, 1);
  EXPECT_EQ(std::memcmp(norm->data, s.f16.data(), 6), 0);
  EXPECT_EQ(f->tensor("missing"), nullptr);
}

TEST(SafetensorsFile, ReadsHandWrittenHeaderWithScalar) {
  const auto bytes =
      image(R"({"__metadata__":{"a":"b"},"s":{"dtype":"F32","shape":[],"data_offsets":[8,12]},)"
            R"("t":{"dtype":"F16","shape":[2,2],"data_offsets":[0,8]}})",
            12);
  auto f = parse(bytes);
  ASSERT_EQ(f->tensors().size(), 2u);
  EXPECT_EQ(f->tensors()[0].name, "t");
  EXPECT_EQ(f->tensor("s")->n_dims, 0);
  EXPECT_EQ(f->tensor("s")->n_elements(), 1);
  EXPECT_EQ(f->metadata().at("a"), "b");
}

TEST(SafetensorsWriter, RejectsBadTensors) {
  TempDir dir;
  const std::string path = dir.file("x.safetensors");
  float x[4] = {};
  EXPECT_THROW(write_safetensors(path, {{"q", DType::Q8_0, {32}, x, 34}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"a", DType::F32, {4}, x, 12}}), Error);
  EXPECT_THROW(write_safetensors(path, {{"a", DType::F32, {4, 0}, x, 0}}), Error);
  EXPECT_THROW(
      write_safetensors(path, {{"a", DType::F32, {4}, x, 16}, {"a", DType::F32, {4}, x, 16}}),
      Error);
  EXPECT_THROW(write_safetensors(path, {{"__metadata__", DType::F32, {4}, x, 16}}), Error);
  EXPECT_THROW(write_safetensors("/nonexistent/dir/x.safetensors", {}), Error);
}

TEST(SafetensorsSet, LoadsSingleFileDirectory) {
  TempDir dir;
  Sample s;
  write_safetensors(dir.file("model.safetensors"), s.tensors());
  auto set = SafetensorsSet::open_dir(dir.str());
  EXPECT_EQ(set->files().size(), 1u);
  ASSERT_EQ(set->tensors().size(), 3u);
  EXPECT_EQ(set->tensors()[0]->name, "lm_head.weight");  // sorted by name
  EXPECT_EQ(set->require("model.norm.weight").ne[0], 3);
  EXPECT_EQ(set->tensor("nope"), nullptr);
  try {
    set->require("nope");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("tensor 'nope' not found"), std::string::npos);
  }
}

TEST(SafetensorsSet, LoadsShardedDirectory) {
  TempDir dir;
  Sample s;
  auto all = s.tensors();
  write_safetensors(dir.file("model-00001-of-00002.safetensors"), {all[0], all[1]});
  write_safetensors(dir.file("model-00002-of-00002.safetensors"), {all[2]});
  write_text(dir.file("model.safetensors.index.json"),
             R"({"metadata":{"total_size":38},"weight_map":{)"
             R"("model.embed.weight":"model-00001-of-00002.safetensors",)"
             R"("model.norm.weight":"model-00001-of-00002.safetensors",)"
             R"("lm_head.weight":"model-00002-of-00002.safetensors"}})");
  auto set = SafetensorsSet::open_dir(dir.str());
  EXPECT_EQ(set->files().size(), 2u);  // each shard opened once
  ASSERT_EQ(set->tensors().size(), 3u);
  EXPECT_EQ(std::memcmp(set->require("model.embed.weight").data, s.f32.data(), 24), 0);
  EXPECT_EQ(std::memcmp(set->require("lm_head.weight").data, s.bf16.data(), 8), 0);
}

std::string open_dir_error(const std::string& dir) {
  try {
    SafetensorsSet::open_dir(dir);
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "open_dir succeeded but an error was expected";
  return "";
}

TEST(SafetensorsSet, ReportsBrokenDirectories) {
  TempDir empty;
  EXPECT_NE(open_dir_error(empty.str()).find("no model.safetensors"), std::string::npos);

  TempDir missing_shard;
  write_text(missing_shard.file("model.safetensors.index.json"),
             R"({"weight_map":{"a":"model-00009.safetensors"}})");
  EXPECT_NE(open_dir_error(missing_shard.str()).find("shard 'model-00009.safetensors'"),
            std::string::npos);

  TempDir missing_tensor;
  Sample s;
  write_safetensors(missing_tensor.file("shard.safetensors"), s.tensors());
  write_text(missing_tensor.file("model.safetensors.index.json"),
             R"({"weight_map":{"ghost":"shard.safetensors"}})");
  EXPECT_NE(open_dir_error(missing_tensor.str()).find("tensor 'ghost' is listed in shard"),
            std::string::npos);

  TempDir escape;
  write_text(escape.file("model.safetensors.index.json"), R"({"weight_map":{"a":"../x"}})");
  EXPECT_NE(open_dir_error(escape.str()).find("invalid shard file name"), std::string::npos);

  TempDir no_map;
  write_text(no_map.file("model.safetensors.index.json"), R"({"metadata":{}})");
  EXPECT_NE(open_dir_error(no_map.str()).find("no 'weight_map'"), std::string::npos);

  TempDir bad_json;
  write_text(bad_json.file("model.safetensors.index.json"), "{");
  EXPECT_NE(open_dir_error(bad_json.str()).find("not valid JSON"), std::string::npos);
}

// ---- corrupt input ----

TEST(SafetensorsCorrupt, EveryTruncationThrows) {
  TempDir dir;
  Sample s;
  write_safetensors(dir.file("m.safetensors"), s.tensors());
  const auto bytes = read_all(dir.file("m.safetensors"));
  for (size_t n = 0; n < bytes.size(); ++n) {
    std::vector<uint8_t> prefix(bytes.begin(), bytes.begin() + static_cast<ptrdiff_t>(n));
    EXPECT_THROW(parse(prefix), Error) << "prefix of " << n << " bytes";
  }
  EXPECT_NO_THROW(parse(bytes));
}

TEST(SafetensorsCorrupt, BadHeaderLength) {
  EXPECT_ERROR_HAS(std::vector<uint8_t>(4, 0), "shorter than the 8-byte header length");
  auto huge = image("{}", 0);
  huge[7] = 0x40;
  EXPECT_ERROR_HAS(huge, "exceeds the 100 MB limit");
  auto long_header = image("{}", 0);
  long_header[0] = 200;
  EXPECT_ERROR_HAS(long_header, "larger than the rest of the file");
}

TEST(SafetensorsCorrupt, BadJson) {
  EXPECT_ERROR_HAS(image("{\"a\":", 0), "not valid JSON");
  EXPECT_ERROR_HAS(image("[1,2]", 0), "not a JSON object");
  EXPECT_ERROR_HAS(image(R"({"a":[[[[[[1]]]]]]})", 0), "nested too deeply");
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                         8),
                   "lists 'a' more than once");
  EXPECT_ERROR_HAS(image(R"({"__metadata__":{"k":1}})", 0), "metadata entry 'k' is not a string");
  EXPECT_ERROR_HAS(image(R"({"__metadata__":[]})", 0), "'__metadata__' is not a JSON object");
}

TEST(SafetensorsCorrupt, BadEntries) {
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8),
                   "tensor 'w' has dtype I64, which k25 does not support");
  EXPECT_ERROR_HAS(image(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), "no string 'dtype'");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4), "no array 'shape'");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                   "data_offsets");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                   "not a positive integer");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}})", 4),
                   "not a positive integer");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                   "not a positive integer");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[1,1,1,1,1],"data_offsets":[0,4]}})", 4),
                   "5 dimensions");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                         R"("data_offsets":[0,4]}})",
                         4),
                   "overflows");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,0]}})", 8),
                   "invalid data_offsets");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 8),
                   "span 4 bytes");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})", 8),
                   "extends past the end");
  EXPECT_ERROR_HAS(image(R"({"w":{"dtype":"F32","shape":[1],)"
                         R"("data_offsets":[18446744073709551612,18446744073709551616]}})",
                         8),
                   "invalid data_offsets");
  EXPECT_ERROR_HAS(image(R"({"w":7})", 0), "tensor 'w' is not a JSON object");
}

TEST(SafetensorsCorrupt, OverlappingTensors) {
  EXPECT_ERROR_HAS(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                         12),
                   "tensors 'a' and 'b' overlap");
}

}  // namespace
}  // namespace k25
