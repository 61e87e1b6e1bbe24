#include "kv/l1_window_cache.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "engine/batched_bench.h"
#include "interleaved_run.h"
#include "kv/paged_kv_cache.h"
#include "kv_runs.h"
#include "model/model.h"
#include "test_paths.h"

namespace k25 {
namespace {

constexpr int kLayers = 2, kKvDim = 5, kPageTokens = 3;

// A value that names its (sequence, layer, K/V, position, element) slot; `version` tells a row
// from a rewrite of it.
float tag(int seq, int layer, bool value, int pos, int i, int version = 0) {
  return static_cast<float>(
      ((((version * 4 + seq) * 8 + layer) * 2 + (value ? 1 : 0)) * 1000 + pos) * 16 + i);
}

void store_row(KvCache& kv, int seq, int layer, int pos, int version = 0) {
  float k[kKvDim], v[kKvDim];
  for (int i = 0; i < kKvDim; ++i) {
    k[i] = tag(seq, layer, false, pos, i, version);
    v[i] = tag(seq, layer, true, pos, i, version);
  }
  kv.store(seq, layer, pos, k, v, kKvDim);
}

// Stores positions [first, last) of every layer.
void store_positions(KvCache& kv, int seq, int first, int last, int version = 0) {
  for (int pos = first; pos < last; ++pos) {
    for (int layer = 0; layer < kLayers; ++layer) store_row(kv, seq, layer, pos, version);
  }
}

// Reads positions [0, n) run by run, as attention does, and checks every element.
void expect_rows(KvCache& kv, int seq, int n, int version = 0) {
  for (int layer = 0; layer < kLayers; ++layer) {
    testing::for_each_value(kv, seq, layer, n, kKvDim, [&](int p, const float* row) {
      for (int i = 0; i < kKvDim; ++i) {
        ASSERT_EQ(row[i], tag(seq, layer, true, p, i, version))
            << "seq " << seq << " layer " << layer << " pos " << p << " value";
      }
    });
    testing::for_each_key(kv, seq, layer, n, kKvDim, [&](int p, auto element) {
      for (int i = 0; i < kKvDim; ++i) {
        ASSERT_EQ(element(i), tag(seq, layer, false, p, i, version))
            << "seq " << seq << " layer " << layer << " pos " << p << " key";
      }
    });
  }
}

// The ring's first served position: its valid range starts at `lo`, and it serves from the first
// key tile boundary on.
int served_from(int lo, int window) {
  const int width = key_tile_width(window);
  return (lo + width - 1) / width * width;
}

// Checks where every position [0, hi) of `seq` is served from after positions were stored in
// order up to hi - 1, the ring starting at `first_stored`: the newest `window` stored ones from
// the first key tile boundary among them on from the ring, in runs that end at the wrap point or
// hi, the rest from the inner cache, in runs that stop at the ring's first served position.
void expect_runs(L1WindowKvCache& l1, KvCache& inner, int seq, int window, int first_stored,
                 int hi) {
  const int lo = served_from(std::max(first_stored, hi - window), window);
  for (int layer = 0; layer < kLayers; ++layer) {
    for (bool value : {false, true}) {
      for (int p = 0; p < hi; ++p) {
        int run = 0, inner_run = 0;
        const void* row = nullptr;
        const void* inner_row = nullptr;
        if (value) {
          row = l1.values(seq, layer, p, &run);
          inner_row = inner.values(seq, layer, p, &inner_run);
        } else {
          const KeyRun keys = l1.key_run(seq, layer, p), inner_keys = inner.key_run(seq, layer, p);
          row = keys.tile + keys.lane;
          inner_row = inner_keys.tile + inner_keys.lane;
          run = keys.n;
          inner_run = inner_keys.n;
        }
        SCOPED_TRACE("window " + std::to_string(window) + " hi " + std::to_string(hi) + " pos " +
                     std::to_string(p) + " layer " + std::to_string(layer));
        if (p >= lo) {
          EXPECT_NE(row, inner_row) << "the ring serves the newest positions";
          EXPECT_EQ(run, std::min(window - p % window, hi - p));
          if (p % window == 0) {
            EXPECT_EQ(reinterpret_cast<uintptr_t>(row) % 64, 0u) << "ring blocks are aligned";
          }
        } else {
          EXPECT_EQ(row, inner_row);
          // An inner run stops where the ring serves from (when it serves anything).
          EXPECT_EQ(run, lo < hi ? std::min(inner_run, lo - p) : inner_run);
        }
      }
    }
  }
}

TEST(L1WindowKvCache, RowsRoundTripThroughTheWindowAndBelowIt) {
  for (int window : {1, 2, 5, 16}) {
    PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
    L1WindowKvCache l1(paged, kLayers, kKvDim, window);
    l1.reserve(0, 40);
    for (int pos = 0; pos < 23; ++pos) {
      for (int layer = 0; layer < kLayers; ++layer) store_row(l1, 0, layer, pos);
      expect_runs(l1, paged, 0, window, 0, pos + 1);
      expect_rows(l1, 0, pos + 1);
    }
    expect_rows(paged, 0, 23);  // write-through: the pages hold every position
  }
}

TEST(L1WindowKvCache, OverAContiguousCache) {
  ContiguousKvCache contiguous(kLayers, kKvDim, 100);
  L1WindowKvCache l1(contiguous, kLayers, kKvDim, 4);
  l1.reserve(0, 10);
  store_positions(l1, 0, 0, 10);
  expect_runs(l1, contiguous, 0, 4, 0, 10);
  expect_rows(l1, 0, 10);
  expect_rows(contiguous, 0, 10);
}

TEST(L1WindowKvCache, PositionsNotStoredThroughItComeFromTheInnerCache) {
  PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
  L1WindowKvCache l1(paged, kLayers, kKvDim, 8);
  paged.reserve(0, 30);
  // Rows 0..9 as if adopted from the prefix cache: written to the pages, not through l1.
  store_positions(paged, 0, 0, 10);
  store_positions(l1, 0, 10, 13);
  expect_runs(l1, paged, 0, 8, 10, 13);
  expect_rows(l1, 0, 13);

  // A rewrite inside the ring reaches both copies; one older than the ring only the pages.
  for (int layer = 0; layer < kLayers; ++layer) {
    for (int pos = 0; pos < 13; ++pos) store_row(l1, 0, layer, pos, 1);
  }
  expect_runs(l1, paged, 0, 8, 10, 13);
  expect_rows(l1, 0, 13, 1);
  expect_rows(paged, 0, 13, 1);

  // A gap (positions 13 and 14 never stored) restarts the ring at the next stored position.
  for (int layer = 0; layer < kLayers; ++layer) store_row(l1, 0, layer, 15, 1);
  expect_runs(l1, paged, 0, 8, 15, 16);
}

TEST(L1WindowKvCache, LayersKeepTheirOwnWindow) {
  PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
  L1WindowKvCache l1(paged, kLayers, kKvDim, 4);
  l1.reserve(0, 10);
  for (int pos = 0; pos < 6; ++pos) store_row(l1, 0, 0, pos);  // layer 1 skipped (a plan)
  for (int pos = 0; pos < 6; ++pos) {
    EXPECT_EQ(l1.key_run(0, 1, pos).tile, paged.key_run(0, 1, pos).tile) << pos;
    EXPECT_EQ(l1.key_run(0, 1, pos).n, paged.key_run(0, 1, pos).n) << pos;
  }
  EXPECT_NE(l1.key_run(0, 0, 5).tile, paged.key_run(0, 0, 5).tile);
}

TEST(L1WindowKvCache, InterleavedSequencesKeepSeparateRings) {
  PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
  L1WindowKvCache l1(paged, kLayers, kKvDim, 5);
  EXPECT_EQ(l1.bytes_used(), 0u) << "rings are allocated on first store";
  for (int pos = 0; pos < 12; ++pos) {
    for (int seq : {0, 3}) {
      l1.reserve(seq, pos + 1);
      for (int layer = 0; layer < kLayers; ++layer) store_row(l1, seq, layer, pos);
    }
  }
  EXPECT_GT(l1.bytes_used(), 0u);
  const size_t two_rings = l1.bytes_used();
  for (int seq : {0, 3}) {
    expect_runs(l1, paged, seq, 5, 0, 12);
    expect_rows(l1, seq, 12);
  }
  l1.clear(0);
  EXPECT_EQ(l1.bytes_used(), two_rings / 2) << "clear frees the ring";
  EXPECT_EQ(paged.page_table(0).size(), 0u) << "clear reaches the inner cache";
  expect_rows(l1, 3, 12);
}

TEST(L1WindowKvCache, ClearResetsTheRing) {
  PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
  L1WindowKvCache l1(paged, kLayers, kKvDim, 4);
  l1.reserve(0, 10);
  store_positions(l1, 0, 0, 10);
  l1.clear(0);
  EXPECT_EQ(l1.bytes_used(), 0u);
  EXPECT_THROW(l1.key_run(0, 0, 0), Error) << "nothing reserved after clear";
  // The new sequence's rows come from the pages until stored through l1 again.
  paged.reserve(0, 10);
  store_positions(paged, 0, 0, 10, 2);
  for (int pos = 0; pos < 10; ++pos) {
    int run = 0, inner_run = 0;
    EXPECT_EQ(l1.values(0, 1, pos, &run), paged.values(0, 1, pos, &inner_run)) << pos;
    EXPECT_EQ(run, inner_run);
  }
  expect_rows(l1, 0, 10, 2);
}

TEST(L1WindowKvCache, RejectsBadShapesAndRows) {
  PagedKvCache paged(kLayers, kKvDim, 100, 1 << 20, kPageTokens);
  EXPECT_THROW(L1WindowKvCache(paged, kLayers, kKvDim, 0), Error);
  EXPECT_THROW(L1WindowKvCache(paged, 0, kKvDim, 4), Error);
  L1WindowKvCache l1(paged, kLayers, kKvDim, 4);
  const float row[kKvDim + 1] = {};
  EXPECT_THROW(l1.store(0, 0, 0, row, row, kKvDim), Error) << "position not reserved";
  l1.reserve(0, 2);
  EXPECT_THROW(l1.store(0, 0, 0, row, row, kKvDim + 1), Error);
  EXPECT_THROW(l1.store(0, kLayers, 0, row, row, kKvDim), Error);
  EXPECT_THROW(l1.store(-1, 0, 0, row, row, kKvDim), Error);
  EXPECT_EQ(l1.bytes_used(), 0u) << "a failed store allocates nothing";
}

// Window 4 over pages of 3, positions 0..9 stored: the ring holds positions 6..9 in key tiles of 4
// slots and serves them from the tile boundary at 8 on, so attention's walk over [0, 10) reads
// pages [0, 3), [3, 6) and [6, 8) (clipped at 8) from the pool, then ring slots 0..1 (positions
// 8, 9): 2 of 10 from the ring.
TEST(L1WindowKvCache, HitShareCountsPositionsPerKeysCall) {
  PagedKvCache paged(1, kKvDim, 100, 1 << 20, kPageTokens);
  L1WindowKvCache l1(paged, 1, kKvDim, 4);
  EXPECT_EQ(l1.hit_share(), 0.0);
  l1.reserve(0, 10);
  const float row[kKvDim] = {};
  for (int pos = 0; pos < 10; ++pos) l1.store(0, 0, pos, row, row, kKvDim);
  std::vector<int> runs;
  for (int p = 0; p < 10;) {
    int value_run = 0;
    const int run = l1.key_run(0, 0, p).n;
    l1.values(0, 0, p, &value_run);  // values are not counted again
    EXPECT_EQ(run, value_run);
    runs.push_back(run);
    p += run;
  }
  EXPECT_EQ(runs, (std::vector<int>{3, 3, 2, 2}));
  EXPECT_EQ(l1.ring_positions_served(), 2u);
  EXPECT_EQ(l1.positions_served(), 10u);
  EXPECT_DOUBLE_EQ(l1.hit_share(), 0.2);
  l1.reset_hit_counts();
  EXPECT_EQ(l1.positions_served(), 0u);
  EXPECT_EQ(l1.hit_share(), 0.0);
}

// Reading the newest positions from the ring changes where attention finds them, not what it
// computes: the logits are bit for bit those of the pages alone.
TEST(L1WindowKvCache, ModelLogitsEqualThePagedCacheBitForBit) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  const ModelConfig& c = model->config();
  const Tokenizer& tok = model->tokenizer();
  std::string long_text;
  for (int i = 0; i < 12; ++i) long_text += "Once upon a time there was a little dog named Max. ";
  const std::vector<std::vector<TokenId>> prompts = {
      tok.encode(long_text, true, false),
      tok.encode("Lily and Ben went to the park and played with a big red ball", true, false)};
  ASSERT_GT(prompts[0].size(), 128u) << "the prompt must be longer than the largest window";
  const int steps = 20, chunk = 57;
  ASSERT_LE(static_cast<int>(prompts[0].size()) + steps, c.context_length);

  PagedKvCache reference_kv(c.n_layers, c.kv_dim(), c.context_length, 8 << 20);
  const std::vector<float> expected =
      testing::run_interleaved_greedy(*model, reference_kv, prompts, chunk, steps, nullptr);
  for (int window : {1, 5, 16, 128}) {
    PagedKvCache paged(c.n_layers, c.kv_dim(), c.context_length, 8 << 20);
    L1WindowKvCache l1(paged, c.n_layers, c.kv_dim(), window);
    const std::vector<float> got =
        testing::run_interleaved_greedy(*model, l1, prompts, chunk, steps, &expected);
    ASSERT_EQ(got.size(), expected.size());
    size_t differing = 0;
    for (size_t i = 0; i < got.size(); ++i) differing += got[i] != expected[i] ? 1 : 0;
    EXPECT_EQ(differing, 0u) << "window " << window;
    EXPECT_GT(l1.ring_positions_served(), 0u) << "window " << window;
    EXPECT_LT(l1.ring_positions_served(), l1.positions_served()) << "window " << window;
  }
}

// The batched bench's hit share covers the decode steps only: at position p a sequence reads
// p + 1 positions, those of the newest 4 from the ring's key tile boundary (20) on, so 3 steps
// after a 20-token prompt give (1 + 2 + 3) / (21 + 22 + 23) = 1 / 11 for every sequence.
TEST(L1WindowKvCache, BatchedBenchReportsTheDecodeHitShare) {
  K25_REQUIRE_SHARED();
  auto model = Model::load(testing::shared_path("models/stories260K.gguf"));
  ThreadPool pool(2);
  BatchedBenchCase c;
  c.n_prompt = 20;
  c.n_generate = 3;
  c.n_parallel = 2;
  c.l1_window = 4;
  EXPECT_DOUBLE_EQ(run_batched_bench(*model, c, pool).l1_hit_share, 1.0 / 11);
  c.l1_window = 0;
  EXPECT_EQ(run_batched_bench(*model, c, pool).l1_hit_share, 0.0);
  c.l1_window = -1;
  EXPECT_THROW(run_batched_bench(*model, c, pool), Error);
}

}  // namespace
}  // namespace k25
