// Raw L3 read performance: 4 KiB random reads through DiskStore (io_uring, O_DIRECT, checksum
// verified) at queue depth 1 and 32 over a file of --mib MiB, then fio doing the same reads on
// the same file, so the store's figure can be judged against what the device can do. Then
// spills and restores as the engine does them: --restore-pages pages of --page-kib each, all
// written at once, then all read at once, from and into memory that is written and read in place
// (a 4096-byte header, then 4096-aligned K/V bytes: the L3 tier's layout) and through staging
// copies (an unpadded header), with the bandwidth and the CPU time of the calling thread (the
// engine's) per spill and per restore.
//   k25-l3bench [--dir DIR] [--mib 256] [--seconds 5] [--no-fio] [--page-kib 2048]
//               [--restore-pages 64] [--restores 5]
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"
#include "kv/disk_store.h"
#include "kv/staging_buffer.h"

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;

constexpr size_t kPage = 4096;

k25::DiskStoreOptions store_options(const std::string& dir, uint64_t pages) {
  k25::DiskStoreOptions o;
  o.path = dir;
  o.capacity_bytes = pages * kPage;
  o.page_size = kPage;
  o.queue_depth = 64;
  return o;
}

void fill(const std::string& dir, uint64_t pages) {
  k25::DiskStore store(store_options(dir, pages));
  std::vector<std::byte> page(kPage);
  std::mt19937_64 rng(1);
  const auto start = Clock::now();
  for (uint64_t key = 0; key < pages; ++key) {
    for (size_t i = 0; i < kPage; i += 8) {
      const uint64_t word = rng();
      std::memcpy(&page[i], &word, 8);
    }
    store.submit_write(key, page);
    while (store.in_flight() >= 32) {
      for (const auto& c : store.poll(1000ms))
        if (!c.ok()) k25::fail("write of page ", c.key, " failed: ", k25::to_string(c.status));
    }
  }
  if (!store.drain(60s)) k25::fail("writes did not finish within 60 s");
  for (const auto& c : store.poll())
    if (!c.ok()) k25::fail("write of page ", c.key, " failed: ", k25::to_string(c.status));
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("fill: %llu pages of 4 KiB in %.2f s (%.0f MiB/s, QD32 writes), O_DIRECT %s\n",
              static_cast<unsigned long long>(pages), s, pages * kPage / s / (1 << 20),
              store.stats().direct_io ? "on" : "OFF (buffered fallback)");
}

struct Result {
  double p50_us, p99_us, iops, mib_s;
};

Result store_reads(const std::string& dir, uint64_t pages, unsigned depth, double seconds) {
  k25::DiskStore store(store_options(dir, pages));
  if (store.keys().size() != pages) k25::fail("the index has ", store.keys().size(), " pages");
  std::mt19937_64 rng(depth);
  std::vector<std::vector<std::byte>> buffers(depth, std::vector<std::byte>(kPage));
  std::vector<size_t> free_buffers;
  for (size_t i = 0; i < depth; ++i) free_buffers.push_back(i);
  std::unordered_map<k25::L3Ticket, size_t> buffer_of;
  uint64_t done = 0;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  while (Clock::now() < end) {
    while (!free_buffers.empty()) {
      const size_t b = free_buffers.back();
      free_buffers.pop_back();
      buffer_of[store.submit_read(rng() % pages, buffers[b])] = b;
    }
    for (const auto& c : store.poll(1000ms)) {
      if (!c.ok()) k25::fail("read of page ", c.key, " failed: ", k25::to_string(c.status));
      free_buffers.push_back(buffer_of.at(c.ticket));
      buffer_of.erase(c.ticket);
      ++done;
    }
  }
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  store.drain(10s);
  const auto& h = store.read_latency();
  return {h.quantile(0.5) / 1e3, h.quantile(0.99) / 1e3, done / s, done * kPage / s / (1 << 20)};
}

// fio on the same file and access pattern; nullopt when fio is missing or fails.
std::optional<Result> fio_reads(const std::string& file, uint64_t pages, unsigned depth,
                                double seconds) {
  for (const char* engine : {"io_uring", "libaio"}) {
    const std::string cmd = k25::concat(
        "fio --name=l3 --readonly --filename=", file, " --rw=randread --bs=4k --direct=1",
        " --ioengine=", engine, " --iodepth=", depth, " --size=", pages * kPage,
        " --runtime=", seconds, " --time_based --randrepeat=0 --lat_percentiles=1",
        " --output-format=json 2>/dev/null");
    FILE* pipe = ::popen(cmd.c_str(), "r");
    if (!pipe) return std::nullopt;
    std::string out;
    char buf[4096];
    while (size_t n = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, n);
    if (::pclose(pipe) != 0) continue;
    try {
      const auto j = nlohmann::json::parse(out.substr(out.find('{')));
      const auto& read = j.at("jobs").at(0).at("read");
      // lat = submission + completion, what DiskStore's histogram measures (clat leaves out
      // the submitting system call, which for O_DIRECT may issue the read inline).
      const auto& pct = read.at("lat_ns").at("percentile");
      std::printf("  (fio %s, engine %s)\n", j.value("fio version", "?").c_str(), engine);
      return Result{pct.at("50.000000").get<double>() / 1e3,
                    pct.at("99.000000").get<double>() / 1e3, read.at("iops").get<double>(),
                    read.at("bw_bytes").get<double>() / (1 << 20)};
    } catch (const std::exception&) {
      continue;
    }
  }
  return std::nullopt;
}

double thread_cpu_seconds() {
  timespec t{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

// Waits for `n` completions; fails on the first that is not ok.
void wait_for_all(k25::DiskStore& store, size_t n) {
  for (size_t done = 0; done < n;) {
    for (const auto& c : store.poll(1000ms)) {
      if (!c.ok()) {
        k25::fail(c.is_write ? "write" : "read", " of page ", c.key,
                  " failed: ", k25::to_string(c.status));
      }
      ++done;
    }
  }
}

// Writes `pages` pages of `page_bytes` after a header of `header_bytes`, all submitted at once
// as the engine spills idle pages, then reads them back the same way, `rounds` times each;
// prints the mean wall time, bandwidth and calling-thread CPU per spill and per restore.
// in_place: the K/V bytes are written from and read into aligned memory at a 4096-aligned
// offset of the page (the L3 tier's layout); otherwise the header is unpadded and everything is
// staged.
void spills_and_restores(const std::string& dir, size_t page_bytes, size_t pages, int rounds,
                         bool in_place) {
  const size_t header_bytes = in_place ? kPage : 80;
  const char* layout = in_place ? "in place" : "staged";
  // Twice the pages: a page written again keeps its old slots until the new write completes.
  k25::DiskStoreOptions o = store_options(dir, 2 * pages * (page_bytes / kPage + 2));
  k25::DiskStore store(o);
  std::vector<std::byte> header(header_bytes, std::byte{1});
  std::vector<k25::StagingBuffer> bodies;  // 4096-aligned: the in-place sources and destinations
  std::mt19937_64 rng(7);
  for (size_t key = 0; key < pages; ++key) {
    bodies.emplace_back(page_bytes);
    if (bodies.back().empty()) k25::fail("out of memory for ", page_bytes, " bytes");
    // Mapped before the clock starts, as an L2 page is.
    for (size_t i = 0; i < page_bytes; i += 8) {
      const uint64_t v = rng();
      std::memcpy(bodies.back().data() + i, &v, 8);
    }
  }
  const double mib = static_cast<double>(pages * page_bytes) / (1 << 20);
  const auto report = [&](const char* what, double wall, double cpu) {
    std::printf("%-7s %-9s %zu x %zu KiB: %7.1f ms  %7.0f MiB/s  engine-thread CPU %6.1f ms\n",
                what, layout, pages, page_bytes >> 10, wall / rounds * 1e3, mib * rounds / wall,
                cpu / rounds * 1e3);
  };
  double wall = 0, cpu = 0;
  for (int r = 0; r < rounds; ++r) {
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = Clock::now();
    for (size_t key = 0; key < pages; ++key) {
      const std::span<const std::byte> pieces[] = {
          header, std::span<const std::byte>(bodies[key].data(), page_bytes)};
      store.submit_write(key, pieces, in_place ? 1 : SIZE_MAX);
    }
    wait_for_all(store, pages);
    wall += std::chrono::duration<double>(Clock::now() - t0).count();
    cpu += thread_cpu_seconds() - cpu0;
  }
  report("spill", wall, cpu);
  wall = 0;
  cpu = 0;
  for (int r = 0; r < rounds; ++r) {
    std::vector<std::vector<std::byte>> headers(pages, std::vector<std::byte>(header_bytes));
    std::vector<std::vector<std::byte>> staged_bodies;
    if (!in_place) staged_bodies.assign(pages, std::vector<std::byte>(page_bytes, std::byte{0}));
    const double cpu0 = thread_cpu_seconds();
    const auto t0 = Clock::now();
    for (size_t key = 0; key < pages; ++key) {
      std::span<std::byte> body = in_place ? std::span<std::byte>(bodies[key].data(), page_bytes)
                                           : std::span<std::byte>(staged_bodies[key]);
      store.submit_read(key, std::vector<std::span<std::byte>>{headers[key], body}, 1);
    }
    wait_for_all(store, pages);
    wall += std::chrono::duration<double>(Clock::now() - t0).count();
    cpu += thread_cpu_seconds() - cpu0;
  }
  report("restore", wall, cpu);
}

void print(const char* who, unsigned depth, const Result& r) {
  std::printf("%-6s QD%-3u p50 %7.1f us  p99 %7.1f us  %8.0f IOPS  %7.1f MiB/s\n", who, depth,
              r.p50_us, r.p99_us, r.iops, r.mib_s);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"k25-l3bench: L3 disk tier 4 KiB random read latency and bandwidth vs fio"};
  std::string dir;
  uint64_t mib = 256;
  double seconds = 5;
  bool no_fio = false;
  size_t page_kib = 2048;  // a 7B model's f16 L2 page: 16 positions x 32 layers x K, V x 1024
  size_t restore_pages = 64;
  int n_restores = 5;
  app.add_option("--dir", dir, "directory for the data file (default: a new one in /var/tmp)");
  app.add_option("--mib", mib, "data file size in MiB")->check(CLI::Range(1, 1 << 20));
  app.add_option("--seconds", seconds, "seconds per measurement")->check(CLI::Range(0.1, 600.0));
  app.add_flag("--no-fio", no_fio, "skip the fio comparison");
  app.add_option("--page-kib", page_kib, "KiB of K/V per restored page (a multiple of 4)")
      ->check(CLI::Range(4, 1 << 16));
  app.add_option("--restore-pages", restore_pages, "pages per restore (0: no restores)")
      ->check(CLI::Range(0, 1 << 16));
  app.add_option("--restores", n_restores, "spills and restores per layout")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  if (page_kib % 4 != 0) {
    std::fprintf(stderr, "error: --page-kib must be a multiple of 4 (whole 4 KiB)\n");
    return 2;
  }

  bool remove_dir = false;
  try {
    if (dir.empty()) {
      std::string pattern = "/var/tmp/k25-l3bench-XXXXXX";
      if (!::mkdtemp(pattern.data())) k25::fail("mkdtemp ", pattern, " failed");
      dir = pattern;
      remove_dir = true;
    }
    const uint64_t pages = mib * (1 << 20) / kPage;
    std::printf("L3 bench: %s, %llu MiB, 4 KiB random reads, %.1f s per run\n", dir.c_str(),
                static_cast<unsigned long long>(mib), seconds);
    fill(dir, pages);
    for (unsigned depth : {1u, 32u}) {
      print("k25", depth, store_reads(dir, pages, depth, seconds));
      if (no_fio) continue;
      if (auto r = fio_reads(dir + "/k25-l3.data", pages, depth, seconds)) {
        print("fio", depth, *r);
      } else {
        std::printf("fio    QD%-3u not run (fio missing or failed; scripts/setup.sh installs it)\n",
                    depth);
      }
    }
    if (restore_pages > 0) {
      for (const bool in_place : {false, true}) {
        const std::string sub = dir + (in_place ? "/restore-in-place" : "/restore-staged");
        fs::create_directories(sub);
        spills_and_restores(sub, page_kib << 10, restore_pages, n_restores, in_place);
        fs::remove_all(sub);
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    if (remove_dir) fs::remove_all(dir);
    return 1;
  }
  if (remove_dir) fs::remove_all(dir);
  return 0;
}
