// F16 storage of the KV cache (kernels/kv_dtype.h): the row conversions against the scalar
// reference, attention over F16 rows against attention over F32 rows holding the same rounded
// values, the page pool's and L3's bytes, the tiers agreeing with each other on real models, and
// the config key.
#include "kernels/kv_dtype.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "core/error.h"
#include "kernels/attention.h"
#include "kernels/quant.h"
#include "kernels/set/quant_simd.h"
#include "kv/io_uring_file.h"
#include "kv/l1_window_cache.h"
#include "kv/l2_page_spans.h"
#include "kv/l3_prefix_tier.h"
#include "kv/paged_kv_cache.h"
#include "model/model.h"
#include "parse_error.h"
#include "server/config.h"
#include "test_paths.h"

namespace k25 {
namespace {

uint32_t bits_of(float f) {
  return std::bit_cast<uint32_t>(f);
}

bool is_nan_half(uint16_t h) {
  return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0;
}

// Every half, widened at two alignments (the SIMD body and the scalar tail), is the scalar
// reference's float bit for bit.
TEST(KvDtype, F16RowsWidenLikeTheScalarReference) {
  std::vector<uint16_t> all(65536);
  for (int h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  for (int skip : {0, 5}) {
    std::vector<float> out(all.size() - skip);
    kv_load_row(KvDtype::kF16, all.data() + skip, out.data(), static_cast<int>(out.size()));
    for (size_t i = 0; i < out.size(); ++i) {
      ASSERT_EQ(bits_of(out[i]), bits_of(f16_to_f32_portable(all[i + skip]))) << i + skip;
    }
  }
}

// Floats round to nearest even like the scalar reference: ties, the subnormal range, overflow
// to infinity and random bit patterns, in rows long enough for the SIMD body and with a tail.
TEST(KvDtype, F32RowsRoundToNearestEvenLikeTheScalarReference) {
  struct Known {
    float f;
    uint16_t h;
  };
  const Known known[] = {
      {0.0f, 0x0000},
      {-0.0f, 0x8000},
      {1.0f, 0x3c00},
      {1.0f + 0x1p-11f, 0x3c00},      // tie: the even neighbour 1.0
      {1.0f + 3 * 0x1p-11f, 0x3c02},  // tie: the even neighbour 1 + 2^-9
      {65504.0f, 0x7bff},             // largest half
      {65519.99f, 0x7bff},            // just under the tie with 65536
      {65520.0f, 0x7c00},             // the tie rounds to even: infinity
      {-1e10f, 0xfc00},               // overflow
      {INFINITY, 0x7c00},             // infinities stay
      {-INFINITY, 0xfc00},            //
      {0x1p-24f, 0x0001},             // smallest subnormal
      {0x1p-25f, 0x0000},             // tie with zero: even
      {3 * 0x1p-25f, 0x0002},         // tie between 1 and 2 subnormal steps: even
      {0x1p-14f - 0x1p-24f, 0x03ff},  // largest subnormal
      {0x1p-14f, 0x0400},             // smallest normal
      {-0x1p-30f, 0x8000},            // underflow keeps the sign
  };
  std::vector<float> row;
  for (const Known& k : known) row.push_back(k.f);
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> any;
  std::uniform_real_distribution<float> small(-70000.0f, 70000.0f);
  for (int i = 0; i < 20000; ++i) row.push_back(std::bit_cast<float>(any(rng)));
  for (int i = 0; i < 20000; ++i) row.push_back(small(rng) * (i % 2 ? 1.0f : 0x1p-20f));
  row.push_back(NAN);
  row.push_back(5.0f);  // leaves a tail after the last 16
  std::vector<uint16_t> out(row.size());
  kv_store_row(KvDtype::kF16, row.data(), out.data(), static_cast<int>(row.size()));
  for (size_t i = 0; i < std::size(known); ++i) {
    EXPECT_EQ(out[i], known[i].h) << std::hexfloat << known[i].f;
  }
  for (size_t i = 0; i < row.size(); ++i) {
    if (std::isnan(row[i])) {
      ASSERT_TRUE(is_nan_half(out[i])) << i;
    } else {
      ASSERT_EQ(out[i], f32_to_f16_portable(row[i])) << std::hexfloat << row[i];
    }
  }
}

TEST(KvDtype, EveryHalfSurvivesARoundTrip) {
  std::vector<uint16_t> all(65536);
  for (int h = 0; h < 65536; ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> wide(all.size());
  std::vector<uint16_t> back(all.size());
  kv_load_row(KvDtype::kF16, all.data(), wide.data(), static_cast<int>(all.size()));
  kv_store_row(KvDtype::kF16, wide.data(), back.data(), static_cast<int>(all.size()));
  for (int h = 0; h < 65536; ++h) {
    if (is_nan_half(all[h])) {
      ASSERT_TRUE(is_nan_half(back[h])) << h;
    } else {
      ASSERT_EQ(back[h], all[h]) << h;
    }
  }
}

TEST(KvDtype, ParsesF32AndF16AndRefusesTheRest) {
  EXPECT_EQ(parse_kv_dtype("f32", "k"), KvDtype::kF32);
  EXPECT_EQ(parse_kv_dtype("f16", "k"), KvDtype::kF16);
  EXPECT_STREQ(to_string(KvDtype::kF16), "f16");
  EXPECT_STREQ(to_string(KvDtype::kF32), "f32");
  EXPECT_EQ(kv_dtype_bytes(KvDtype::kF16), 2u);
  const std::string bf16 = testing::error_of([] { parse_kv_dtype("bf16", "--kv-cache-dtype"); });
  EXPECT_NE(bf16.find("--kv-cache-dtype"), std::string::npos) << bf16;
  EXPECT_NE(bf16.find("not supported for the KV cache yet"), std::string::npos) << bf16;
  const std::string q8 = testing::error_of([] { parse_kv_dtype("q8_0", "key"); });
  EXPECT_NE(q8.find("not supported"), std::string::npos) << q8;
  const std::string other = testing::error_of([] { parse_kv_dtype("F16x", "key"); });
  EXPECT_NE(other.find("expected f32 or f16"), std::string::npos) << other;
}

TEST(KvDtype, ServerConfigKeyAndFlag) {
  ServerConfig c;
  EXPECT_EQ(c.kv_cache_dtype, "f16");  // the default: half the bytes, faster decode
  apply_config_yaml(c, "flash_scheduler:\n  kv_cache_dtype: f32\n", "k.yaml");
  EXPECT_EQ(c.kv_cache_dtype, "f32");
  for (const char* bad : {"bf16", "q8_0", "half", "32"}) {
    ServerConfig config;
    const std::string message = testing::error_of([&] {
      apply_config_yaml(config, std::string("flash_scheduler:\n  kv_cache_dtype: ") + bad + "\n",
                        "k.yaml");
    });
    EXPECT_NE(message.find("flash_scheduler.kv_cache_dtype"), std::string::npos) << message;
  }
  bool has_flag = false;
  for (const ConfigKey& key : config_keys()) {
    if (key.path == "flash_scheduler.kv_cache_dtype") has_flag = key.flag == "--kv-cache-dtype";
  }
  EXPECT_TRUE(has_flag);
}

// Random keys, values and queries for attention over F16 rows: k and v hold the rows' F16 values
// as floats, k16 and v16 their bits, each n_cached rows of `stride` elements (the head in their
// first head_dim), in spans of 16 rows as the pool's pages give them.
struct F16AttentionCase {
  std::vector<float> k, v, q;
  std::vector<uint16_t> k16, v16;
  std::vector<KvSpan> spans;
};

F16AttentionCase make_f16_attention_case(int head_dim, int n_cached, int n_queries, int stride,
                                         std::mt19937& rng) {
  std::normal_distribution<float> g(0.0f, 1.0f);
  F16AttentionCase c;
  const size_t n = static_cast<size_t>(n_cached) * stride;
  c.k.resize(n);
  c.v.resize(n);
  c.q.resize(static_cast<size_t>(n_queries) * head_dim);
  for (auto& x : c.k) x = g(rng);
  for (auto& x : c.v) x = g(rng);
  for (auto& x : c.q) x = 2.0f * g(rng);
  c.k16.resize(n);
  c.v16.resize(n);
  kv_store_row(KvDtype::kF16, c.k.data(), c.k16.data(), static_cast<int>(n));
  kv_store_row(KvDtype::kF16, c.v.data(), c.v16.data(), static_cast<int>(n));
  kv_load_row(KvDtype::kF16, c.k16.data(), c.k.data(), static_cast<int>(n));  // rounded
  kv_load_row(KvDtype::kF16, c.v16.data(), c.v.data(), static_cast<int>(n));
  for (int p = 0; p < n_cached; p += 16) {
    const size_t at = static_cast<size_t>(p) * stride;
    c.spans.push_back({c.k16.data() + at, c.v16.data() + at, std::min(16, n_cached - p)});
  }
  return c;
}

// With an F16 cache, attention computes what llama.cpp's F16-cache attention computes: scores of
// the query rounded to F16 with the F16 keys, softmax probabilities rounded to F16, their sum
// with the F16 values (checked against a double-precision model of that arithmetic), on the
// blocked path (head sizes 64, 128) and the portable one (8, 40).
TEST(KvDtype, AttentionOverF16RowsRoundsQueriesAndProbabilitiesToF16) {
  std::mt19937 rng(21);
  const auto f16 = [](double x) {
    return static_cast<double>(f16_to_f32(f32_to_f16(static_cast<float>(x))));
  };
  for (int head_dim : {8, 40, 64, 128}) {
    for (int n_cached : {1, 7, 150}) {
      for (int n_queries : {1, 5, 9}) {
        const int stride = head_dim + 32;  // the head inside wider KV rows
        const F16AttentionCase c =
            make_f16_attention_case(head_dim, n_cached, n_queries, stride, rng);
        const std::vector<float>&k = c.k, &v = c.v, &q = c.q;
        const std::vector<KvSpan>& spans = c.spans;
        std::uniform_int_distribution<int> pos(1, n_cached);
        std::vector<float> out(q.size());
        std::vector<AttentionQuery> queries;
        for (int i = 0; i < n_queries; ++i) {
          const int n_pos = i == 0 ? n_cached : pos(rng);
          queries.push_back({q.data() + i * head_dim, n_pos, out.data() + i * head_dim});
        }
        const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
        std::vector<float> scratch;
        attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()),
                       stride, head_dim, scale, scratch, KvDtype::kF16);
        for (int i = 0; i < n_queries; ++i) {
          const int n_pos = queries[i].n_pos;
          std::vector<double> score(n_pos);
          double max = -1e300, sum = 0;
          for (int p = 0; p < n_pos; ++p) {
            double dot = 0;
            for (int d = 0; d < head_dim; ++d) {
              dot += f16(q[i * head_dim + d]) * k[static_cast<size_t>(p) * stride + d];
            }
            score[p] = dot * scale;
            max = std::max(max, score[p]);
          }
          for (int p = 0; p < n_pos; ++p) sum += std::exp(score[p] - max);
          for (int d = 0; d < head_dim; ++d) {
            double expected = 0;
            for (int p = 0; p < n_pos; ++p) {
              expected +=
                  f16(std::exp(score[p] - max) / sum) * v[static_cast<size_t>(p) * stride + d];
            }
            ASSERT_NEAR(out[i * head_dim + d], expected, 2e-3 * (1 + std::abs(expected)))
                << "head_dim " << head_dim << " cached " << n_cached << " query " << i;
          }
        }
      }
    }
  }
}

// Many queries over F16 rows (a prefill task; the kernels may widen the rows to floats once for
// all of them) give each query the same bits as the query alone (read as F16 at every use), for
// the prefix cache and preemption rely on a token's KV not depending on its batch.
TEST(KvDtype, F16AttentionOfManyQueriesIsBitwiseThatOfEachAlone) {
  std::mt19937 rng(34);
  for (int head_dim : {64, 128}) {
    const int n_cached = 300, n_queries = 40, stride = head_dim + 32;
    const F16AttentionCase c = make_f16_attention_case(head_dim, n_cached, n_queries, stride, rng);
    const std::vector<float>& q = c.q;
    const std::vector<KvSpan>& spans = c.spans;
    std::uniform_int_distribution<int> pos(1, n_cached);
    std::vector<int> n_pos(n_queries), first(n_queries);
    for (int i = 0; i < n_queries; ++i) {
      n_pos[i] = i == 0 ? n_cached : pos(rng);
      first[i] = i % 5 == 0 ? n_pos[i] / 3 : 0;  // some sliding windows
    }
    const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    std::vector<float> scratch, together(q.size());
    std::vector<AttentionQuery> queries;
    for (int i = 0; i < n_queries; ++i) {
      queries.push_back(
          {q.data() + i * head_dim, n_pos[i], together.data() + i * head_dim, first[i]});
    }
    attend_queries(queries.data(), n_queries, spans.data(), static_cast<int>(spans.size()), stride,
                   head_dim, scale, scratch, KvDtype::kF16);
    for (int i = 0; i < n_queries; ++i) {
      std::vector<float> alone(head_dim);
      const AttentionQuery query{q.data() + i * head_dim, n_pos[i], alone.data(), first[i]};
      attend_queries(&query, 1, spans.data(), static_cast<int>(spans.size()), stride, head_dim,
                     scale, scratch, KvDtype::kF16);
      ASSERT_EQ(0,
                std::memcmp(alone.data(), together.data() + i * head_dim, head_dim * sizeof(float)))
          << "head_dim " << head_dim << " query " << i;
    }
  }
}

// The probabilities themselves are F16 values: with one-hot values the output is exactly them.
TEST(KvDtype, F16AttentionWeighsValuesByF16Probabilities) {
  for (int head_dim : {8, 64}) {
    const int n_cached = 3;
    std::vector<float> k(static_cast<size_t>(n_cached) * head_dim, 0.0f), v(k.size(), 0.0f);
    for (int p = 0; p < n_cached; ++p) {
      k[static_cast<size_t>(p) * head_dim] = 0.37f * static_cast<float>(p + 1);
      v[static_cast<size_t>(p) * head_dim + p] = 1.0f;
    }
    std::vector<uint16_t> k16(k.size()), v16(v.size());
    kv_store_row(KvDtype::kF16, k.data(), k16.data(), static_cast<int>(k.size()));
    kv_store_row(KvDtype::kF16, v.data(), v16.data(), static_cast<int>(v.size()));
    std::vector<float> q(head_dim, 0.0f), out(head_dim);
    q[0] = 1.3f;
    const AttentionQuery query{q.data(), n_cached, out.data()};
    const KvSpan span{k16.data(), v16.data(), n_cached};
    std::vector<float> scratch;
    attend_queries(&query, 1, &span, 1, head_dim, head_dim, 1.0f, scratch, KvDtype::kF16);
    float total = 0;
    for (int p = 0; p < n_cached; ++p) {
      EXPECT_EQ(out[p], f16_to_f32(f32_to_f16(out[p]))) << "head_dim " << head_dim << " p " << p;
      EXPECT_GT(out[p], 0.0f);
      total += out[p];
    }
    EXPECT_NEAR(total, 1.0f, 2e-3);
  }
}

TEST(KvDtype, F16PagesHoldHalfTheBytes) {
  const PageGeometry f32{16, 12, 256};
  const PageGeometry f16{16, 12, 256, KvDtype::kF16};
  EXPECT_EQ(PagePool::page_bytes_for(f32), 384u << 10);
  EXPECT_EQ(PagePool::page_bytes_for(f16), PagePool::page_bytes_for(f32) / 2);
  EXPECT_EQ(l2_page_payload_bytes(f16), l2_page_payload_bytes(f32) / 2);
  PagePool pool(f16, 4 * PagePool::page_bytes_for(f16));
  EXPECT_EQ(pool.pages_total(), 4u);
  const PageId page = *pool.allocate();
  EXPECT_EQ(pool.value_block(page, 0) - pool.key_block(page, 0), 16 * 256 * 2);
  size_t span_bytes = 0;
  for (const auto& span : l2_page_spans(pool, page)) span_bytes += span.size();
  EXPECT_EQ(span_bytes, l2_page_payload_bytes(f16));
  EXPECT_THROW(pool.keys(page, 0), Error) << "float views are for f32 pools only";
  // A padded block stays aligned: 3 rows of 5 halves are 30 bytes, padded to 64.
  EXPECT_EQ(PagePool::page_bytes_for({3, 2, 5, KvDtype::kF16}), 4u * 64);
}

// Rows written through store() come back rounded to F16 from the contiguous cache, the paged
// cache and the L1 ring over it, at the same positions.
TEST(KvDtype, EveryCacheStoresF16RowsAlike) {
  constexpr int kLayers = 2, kKvDim = 24, kPositions = 40;
  ContiguousKvCache contiguous(kLayers, kKvDim, 64, KvDtype::kF16);
  PagedKvCache paged(kLayers, kKvDim, 64, 1 << 20, 4, KvDtype::kF16);
  PagedKvCache inner(kLayers, kKvDim, 64, 1 << 20, 4, KvDtype::kF16);
  L1WindowKvCache l1(inner, kLayers, kKvDim, 6);
  EXPECT_EQ(l1.dtype(), KvDtype::kF16);
  std::mt19937 rng(3);
  std::normal_distribution<float> g(0.0f, 3.0f);
  std::vector<float> k(kKvDim), v(kKvDim);
  std::vector<std::vector<uint16_t>> expected_k, expected_v;  // [pos * kLayers + layer]
  for (KvCache* kv : {static_cast<KvCache*>(&contiguous), static_cast<KvCache*>(&paged),
                      static_cast<KvCache*>(&l1)}) {
    kv->reserve(0, kPositions);
  }
  for (int pos = 0; pos < kPositions; ++pos) {
    for (int layer = 0; layer < kLayers; ++layer) {
      for (auto& x : k) x = g(rng);
      for (auto& x : v) x = g(rng);
      expected_k.emplace_back(kKvDim);
      expected_v.emplace_back(kKvDim);
      kv_store_row(KvDtype::kF16, k.data(), expected_k.back().data(), kKvDim);
      kv_store_row(KvDtype::kF16, v.data(), expected_v.back().data(), kKvDim);
      contiguous.store(0, layer, pos, k.data(), v.data(), kKvDim);
      paged.store(0, layer, pos, k.data(), v.data(), kKvDim);
      l1.store(0, layer, pos, k.data(), v.data(), kKvDim);
    }
  }
  for (KvCache* kv : {static_cast<KvCache*>(&contiguous), static_cast<KvCache*>(&paged),
                      static_cast<KvCache*>(&l1)}) {
    EXPECT_THROW(kv->values(0, 0, 0, nullptr), Error);
    std::vector<float> key(kKvDim), expected_key(kKvDim);
    for (int pos = 0; pos < kPositions; ++pos) {
      for (int layer = 0; layer < kLayers; ++layer) {
        int run = 0;
        const std::byte* vrow = kv->value_rows(0, layer, pos, &run);
        const size_t i = static_cast<size_t>(pos) * kLayers + layer;
        kv->load_key(0, layer, pos, key.data(), kKvDim);
        kv_load_row(KvDtype::kF16, expected_k[i].data(), expected_key.data(), kKvDim);
        ASSERT_EQ(key, expected_key) << pos;
        ASSERT_EQ(0, std::memcmp(vrow, expected_v[i].data(), kKvDim * 2)) << pos;
      }
    }
  }
  EXPECT_GT(l1.ring_positions_served(), 0u);
  EXPECT_EQ(contiguous.bytes_used(), 2u * kLayers * 64 * kKvDim * 2);  // grown to the context
}

// A real model's logits with F16 KV are the same, bit for bit, from the contiguous cache, the
// paged cache (pages of 4) and the L1 ring over it: prefill in chunks, then decode steps.
void expect_same_logits_from_every_f16_cache(const std::string& model_file) {
  auto model = Model::load(testing::shared_path("models/" + model_file));
  const ModelConfig& c = model->config();
  ThreadPool pool(2);
  auto contiguous = model->make_kv_cache(KvDtype::kF16);
  PagedKvCache paged(c.n_layers, c.kv_dim(), c.context_length, 64 << 20, 4, KvDtype::kF16);
  PagedKvCache inner(c.n_layers, c.kv_dim(), c.context_length, 64 << 20, 4, KvDtype::kF16);
  L1WindowKvCache l1(inner, c.n_layers, c.kv_dim(), 7);
  const std::vector<TokenId> prompt =
      model->tokenizer().encode("Once upon a time, there was a little dog named Max.", true, false);
  std::vector<std::vector<float>> logits(3, std::vector<float>(c.n_vocab));
  KvCache* caches[] = {contiguous.get(), &paged, &l1};
  for (int i = 0; i < 3; ++i) {
    std::vector<BatchToken> batch;
    for (size_t t = 0; t < prompt.size(); ++t) {
      batch.push_back({prompt[t], static_cast<int>(t), 0, t + 1 == prompt.size()});
      if (batch.size() == 5 || t + 1 == prompt.size()) {
        model->forward(batch, *caches[i], logits[i].data(), pool);
        batch.clear();
      }
    }
  }
  for (int step = 0; step < 20; ++step) {
    SCOPED_TRACE(model_file + " step " + std::to_string(step));
    ASSERT_EQ(0, std::memcmp(logits[0].data(), logits[1].data(), c.n_vocab * sizeof(float)));
    ASSERT_EQ(0, std::memcmp(logits[0].data(), logits[2].data(), c.n_vocab * sizeof(float)));
    const TokenId next = static_cast<TokenId>(std::max_element(logits[0].begin(), logits[0].end()) -
                                              logits[0].begin());
    const int pos = static_cast<int>(prompt.size()) + step;
    for (int i = 0; i < 3; ++i)
      model->forward({{next, pos, 0, true}}, *caches[i], logits[i].data(), pool);
  }
}

TEST(KvDtype, PagedL1AndContiguousF16CachesGiveTheSameLogits) {
  K25_REQUIRE_SHARED();
  expect_same_logits_from_every_f16_cache("stories260K.gguf");
  expect_same_logits_from_every_f16_cache("random-qwen2-tiny.gguf");
}

// F16 pages go to L3 and come back byte-exact.
TEST(KvDtype, F16PagesRoundTripThroughL3) {
  char pattern[] = "/tmp/k25-kv-f16-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  const PageGeometry geometry{4, 3, 40, KvDtype::kF16};
  PagePool pool(geometry, 4 * PagePool::page_bytes_for(geometry));
  DiskStoreOptions o;
  o.path = dir;
  o.capacity_bytes = 16 * 4096;
  std::unique_ptr<L3PrefixTier> tier;
  try {
    tier = std::make_unique<L3PrefixTier>(o, pool);
  } catch (const IoUringUnavailable& e) {
    std::filesystem::remove_all(dir);
    FAIL() << "io_uring is not available here (" << e.what() << "): the L3 tests need it";
  }
  const PageId page = *pool.allocate();
  const size_t block = geometry.page_tokens * geometry.row_bytes();
  std::vector<std::byte> expected;
  std::mt19937 rng(5);
  for (int layer = 0; layer < geometry.n_layers; ++layer) {
    for (std::byte* b : {pool.key_block(page, layer), pool.value_block(page, layer)}) {
      for (size_t i = 0; i < block; ++i) b[i] = static_cast<std::byte>(rng());
      expected.insert(expected.end(), b, b + block);
    }
  }
  const std::vector<int32_t> tokens = {3, 1, 4, 1};
  tier->spill({21, 20, tokens.data(), page}, SpillSource::kCopy);
  tier->limit_in_flight(0);
  EXPECT_EQ(tier->stats().spills, 1u);
  for (int layer = 0; layer < geometry.n_layers; ++layer) {
    std::memset(pool.key_block(page, layer), 0, block);
    std::memset(pool.value_block(page, layer), 0, block);
  }
  const L3RestoreId id = tier->begin_restore({{21, 20, tokens.data(), page}});
  for (int i = 0; i < 50 && !tier->restore_done(id); ++i)
    tier->poll(std::chrono::milliseconds(100));
  std::vector<bool> kept;
  EXPECT_EQ(tier->finish_restore(id, &kept), 1u);
  std::vector<std::byte> got;
  for (int layer = 0; layer < geometry.n_layers; ++layer) {
    for (const std::byte* b : {pool.key_block(page, layer), pool.value_block(page, layer)}) {
      got.insert(got.end(), b, b + block);
    }
  }
  EXPECT_EQ(got, expected);
  tier.reset();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace k25
