#include "loadgen/rss_sampler.h"

#include <cctype>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"

namespace k25::loadgen {

std::optional<long long> proc_status_bytes(std::string_view status, std::string_view name) {
  size_t pos = 0;
  while (pos < status.size()) {
    size_t end = status.find('\n', pos);
    if (end == std::string_view::npos) end = status.size();
    std::string_view line = status.substr(pos, end - pos);
    pos = end + 1;
    if (line.size() <= name.size() || line.substr(0, name.size()) != name ||
        line[name.size()] != ':') {
      continue;
    }
    std::string_view rest = line.substr(name.size() + 1);
    size_t i = 0;
    while (i < rest.size() && std::isspace(static_cast<unsigned char>(rest[i]))) ++i;
    long long value = 0;
    size_t digits = 0;
    for (; i < rest.size() && std::isdigit(static_cast<unsigned char>(rest[i])); ++i, ++digits) {
      value = value * 10 + (rest[i] - '0');
    }
    if (digits == 0 || digits > 15) return std::nullopt;
    while (i < rest.size() && std::isspace(static_cast<unsigned char>(rest[i]))) ++i;
    if (rest.substr(i) != "kB") return std::nullopt;
    return value * 1024;
  }
  return std::nullopt;
}

namespace {

std::optional<std::string> read_status(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

RssSampler::RssSampler(pid_t pid, std::chrono::milliseconds interval)
    : pid_(pid), interval_(interval), start_(std::chrono::steady_clock::now()) {
  if (!sample()) fail("--server-pid ", pid, ": cannot read /proc/", pid, "/status");
  thread_ = std::thread([this] {
    while (!stop_.load()) {
      std::this_thread::sleep_for(interval_);
      if (!sample()) break;  // the process is gone; keep what was seen
    }
  });
}

RssSampler::~RssSampler() {
  stop();
}

void RssSampler::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

bool RssSampler::sample() {
  std::optional<std::string> status = read_status(pid_);
  if (!status) return false;
  const std::optional<long long> rss = proc_status_bytes(*status, "VmRSS");
  const std::optional<long long> hwm = proc_status_bytes(*status, "VmHWM");
  const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  std::lock_guard lock(mutex_);
  if (rss) {
    peak_ = std::max(peak_, *rss);
    samples_.emplace_back(t, *rss);
  }
  if (hwm) hwm_ = *hwm;
  return rss.has_value();
}

long long RssSampler::peak_rss_bytes() const {
  std::lock_guard lock(mutex_);
  return std::max(peak_, hwm_);
}

long long RssSampler::hwm_bytes() const {
  std::lock_guard lock(mutex_);
  return hwm_;
}

std::vector<std::pair<double, long long>> RssSampler::samples() const {
  std::lock_guard lock(mutex_);
  return samples_;
}

}  // namespace k25::loadgen
