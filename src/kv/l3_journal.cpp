#include "kv/l3_journal.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "core/crc32c.h"
#include "core/error.h"

namespace k25 {
namespace {

constexpr char kMagic[8] = {'K', '2', '5', 'L', '3', 'J', 'N', 'L'};
constexpr uint32_t kVersion = 2;
enum : uint8_t { kPut = 1, kErase = 2, kTouch = 3 };

template <typename T>
void put_le(std::string& out, T v) {
  char bytes[sizeof(T)];
  std::memcpy(bytes, &v, sizeof(T));  // x86-64 is little-endian, the format's order
  out.append(bytes, sizeof(T));
}

template <typename T>
T get_le(const std::string& in, size_t& pos) {
  T v;
  std::memcpy(&v, in.data() + pos, sizeof(T));
  pos += sizeof(T);
  return v;
}

std::string header_bytes(uint32_t page_size, uint64_t content_tag) {
  std::string h(kMagic, sizeof(kMagic));
  put_le<uint32_t>(h, kVersion);
  put_le<uint32_t>(h, page_size);
  put_le<uint64_t>(h, content_tag);
  put_le<uint32_t>(h, 0);
  put_le<uint32_t>(h, crc32c(h.data(), h.size()));
  return h;
}

// 0 or -errno; retries short writes.
int write_all(int fd, const std::string& data) {
  size_t done = 0;
  while (done < data.size()) {
    const ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return -errno;
    if (n == 0) return -EIO;
    done += static_cast<size_t>(n);
  }
  return 0;
}

}  // namespace

L3Journal::L3Journal(std::string path, uint32_t page_size, uint64_t content_tag)
    : path_(std::move(path)), page_size_(page_size), content_tag_(content_tag) {}

L3Journal::~L3Journal() {
  close_file();
}

void L3Journal::close_file() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

L3JournalReplay L3Journal::replay(const std::string& path, uint64_t n_slots, uint32_t page_size,
                                  uint64_t content_tag, uint64_t data_file_bytes) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail("L3 index ", path, ": cannot open: ", std::strerror(errno));
  const std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) fail("L3 index ", path, ": read failed");
  return replay_bytes(data, path, n_slots, page_size, content_tag, data_file_bytes);
}

L3JournalReplay L3Journal::replay_bytes(const std::string& data, const std::string& path,
                                        uint64_t n_slots, uint32_t page_size, uint64_t content_tag,
                                        uint64_t data_file_bytes) {
  if (data.size() < kHeaderBytes || std::memcmp(data.data(), kMagic, sizeof(kMagic)) != 0)
    fail("L3 index ", path, ": not an L3 journal (", data.size(), " bytes, bad magic)");
  size_t pos = kHeaderBytes - 4;
  if (get_le<uint32_t>(data, pos) != crc32c(data.data(), kHeaderBytes - 4))
    fail("L3 index ", path, ": header checksum mismatch (file damaged)");
  pos = sizeof(kMagic);
  const auto version = get_le<uint32_t>(data, pos);
  const auto file_page_size = get_le<uint32_t>(data, pos);
  const auto file_tag = get_le<uint64_t>(data, pos);
  if (version != kVersion) fail("L3 index ", path, ": version ", version, ", expected ", kVersion);
  if (file_page_size != page_size)
    fail("L3 index ", path, ": page size ", file_page_size, ", configured ", page_size);
  if (file_tag != content_tag)
    fail("L3 index ", path, ": content tag ", file_tag, " is not this store's ", content_tag,
         " (another model or KV layout)");

  L3JournalReplay out{L3PageTable(n_slots, page_size), 0, 0, 0, {}};
  L3PageTable& table = out.table;
  for (pos = kHeaderBytes; pos < data.size(); pos += kRecordBytes) {
    const auto stop = [&](auto&&... why) {
      out.tail_problem = concat("record ", out.records, " at byte ", pos, " ", why...);
      out.ignored_bytes = data.size() - pos;
    };
    if (data.size() - pos < kRecordBytes) {
      stop("is torn (", data.size() - pos, " of ", kRecordBytes, " bytes)");
      break;
    }
    size_t at = pos + kRecordBytes - 4;
    if (get_le<uint32_t>(data, at) != crc32c(data.data() + pos, kRecordBytes - 4)) {
      stop("fails its checksum");
      break;
    }
    at = pos;
    const auto op = get_le<uint8_t>(data, at);
    at += 3;  // zeros (covered by the checksum)
    L3Entry e;
    e.extent.n_slots = get_le<uint32_t>(data, at);
    const auto key = get_le<uint64_t>(data, at);
    e.extent.first_slot = get_le<uint64_t>(data, at);
    e.length = get_le<uint64_t>(data, at);
    e.crc = get_le<uint32_t>(data, at);
    if (op == kPut) {
      const uint64_t want_slots = e.length / page_size + (e.length % page_size != 0);
      if (e.length == 0 || e.extent.n_slots != want_slots) {
        stop("has length ", e.length, " in ", e.extent.n_slots, " slots");
        break;
      }
      // Written so that no sum overflows (the fields are only as good as their CRC).
      if (e.extent.first_slot >= n_slots || e.extent.n_slots > n_slots - e.extent.first_slot ||
          (e.extent.first_slot + e.extent.n_slots) * page_size > data_file_bytes) {
        // The page is gone (or out of reach); an older one of the key is superseded.
        if (auto old = table.erase(key)) table.slots().release(old->extent);
        ++out.dropped;
      } else if (!table.put_claimed(key, e)) {
        stop("puts page ", key, " on slots another page holds");
        break;
      }
    } else if (op == kErase) {
      if (auto old = table.erase(key)) table.slots().release(old->extent);
    } else if (op == kTouch) {
      table.touch(key);
    } else {
      stop("has an unknown type ", static_cast<int>(op));
      break;
    }
    ++out.records;
  }
  return out;
}

void L3Journal::append_record(uint8_t op, L3Key key, const L3Entry& e) {
  const size_t start = buffered_.size();
  put_le<uint8_t>(buffered_, op);
  buffered_.append(3, '\0');
  put_le<uint32_t>(buffered_, e.extent.n_slots);
  put_le<uint64_t>(buffered_, key);
  put_le<uint64_t>(buffered_, e.extent.first_slot);
  put_le<uint64_t>(buffered_, e.length);
  put_le<uint32_t>(buffered_, e.crc);
  put_le<uint32_t>(buffered_, crc32c(buffered_.data() + start, kRecordBytes - 4));
}

void L3Journal::record_put(L3Key key, const L3Entry& entry) {
  append_record(kPut, key, entry);
}

void L3Journal::record_erase(L3Key key) {
  append_record(kErase, key, L3Entry{});
}

void L3Journal::record_touch(L3Key key) {
  append_record(kTouch, key, L3Entry{});
}

int L3Journal::flush() {
  if (buffered_.empty()) return 0;
  if (broken()) {
    buffered_.clear();
    return -(error_ ? error_ : EIO);
  }
  size_t done = 0;
  int rc = 0;
  while (done < buffered_.size()) {
    const ssize_t n = ::pwrite(fd_, buffered_.data() + done, buffered_.size() - done,
                               static_cast<off_t>(file_bytes_ + done));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      rc = n < 0 ? -errno : -EIO;
      break;
    }
    done += static_cast<size_t>(n);
  }
  if (rc < 0) {
    // Cut a partial append off (should that fail too, replay ignores the torn tail), and stop
    // appending: records after a lost one could not be replayed in order.
    const bool cut = ::ftruncate(fd_, static_cast<off_t>(file_bytes_)) == 0;
    (void)cut;
    close_file();
    error_ = -rc;
  } else {
    file_bytes_ += buffered_.size();
    records_in_file_ += buffered_.size() / kRecordBytes;
    unsynced_ = true;
  }
  buffered_.clear();
  return rc;
}

int L3Journal::sync() {
  if (broken() || !unsynced_) return 0;
  if (::fdatasync(fd_) != 0) return -errno;
  unsynced_ = false;
  return 0;
}

bool L3Journal::unlinked() const {
  if (broken()) return false;
  struct stat open_file {
  }, at_path{};
  if (::fstat(fd_, &open_file) != 0) return false;
  if (::stat(path_.c_str(), &at_path) != 0) return true;
  return open_file.st_ino != at_path.st_ino || open_file.st_dev != at_path.st_dev;
}

void L3Journal::rewrite(const L3PageTable& table) {
  buffered_.clear();
  close_file();
  std::string data = header_bytes(page_size_, content_tag_);
  for (L3Key key : table.keys_by_recency()) append_record(kPut, key, *table.find(key));
  data += buffered_;
  buffered_.clear();

  const std::string tmp = path_ + ".tmp";
  const int fd = ::open(tmp.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    error_ = errno;
    fail("L3 index ", tmp, ": cannot create: ", std::strerror(error_));
  }
  int rc = write_all(fd, data);
  if (rc == 0 && ::fsync(fd) != 0) rc = -errno;
  if (rc == 0 && ::rename(tmp.c_str(), path_.c_str()) != 0) rc = -errno;
  if (rc < 0) {
    ::close(fd);
    ::unlink(tmp.c_str());
    error_ = -rc;
    fail("L3 index ", path_, ": cannot write it: ", std::strerror(error_));
  }
  // The rename is durable only once the directory entry is.
  const std::filesystem::path parent = std::filesystem::path(path_).parent_path();
  const int dfd = ::open(parent.empty() ? "." : parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  fd_ = fd;
  error_ = 0;
  file_bytes_ = data.size();
  records_in_file_ = table.size();
  unsynced_ = false;
}

}  // namespace k25
