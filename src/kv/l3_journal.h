// The L3 index as an append-only journal: every change to the page table (a page stored, erased
// or read) is one fixed-size record with its own CRC-32C, appended with one write() per batch,
// so a crash (SIGKILL, abort, OOM kill) loses nothing the store had acknowledged. Replaying the
// records in order rebuilds the table and its recency order; a torn or corrupt record ends the
// replay, and nothing after it is trusted. The file is compacted (rewritten as one put per page,
// least recently used first: temporary file, fsync, rename, fsync of the directory) at start, at
// a clean close, and when it holds more than twice as many records as pages.
//
// File (little-endian, as written by x86-64):
//   header, 32 bytes: "K25L3JNL" u32 version=2 u32 page_size u64 content_tag u32 0
//                     u32 CRC-32C of the 28 bytes before it
//   record, 40 bytes: u8 op (1 put, 2 erase, 3 touch) u8[3] 0 u32 n_slots u64 key
//                     u64 first_slot u64 length u32 page_crc u32 CRC-32C of the 36 bytes before
//                     (erase and touch carry zeros in the page's fields)
//
// Not synchronised: the DiskStore's thread calls everything.
#pragma once

#include <cstdint>
#include <string>

#include "kv/l3_page_table.h"

namespace k25 {

struct L3JournalReplay {
  L3PageTable table;
  uint64_t records = 0;        // records applied
  uint64_t dropped = 0;        // puts of pages past the end of the data file or the capacity
  uint64_t ignored_bytes = 0;  // from the first torn or corrupt record to the end: not trusted
  std::string tail_problem;    // why the replay stopped before the end; empty when it did not
};

class L3Journal {
 public:
  static constexpr size_t kHeaderBytes = 32;
  static constexpr size_t kRecordBytes = 40;

  // Opens nothing: the file is written by the first rewrite().
  L3Journal(std::string path, uint32_t page_size, uint64_t content_tag);
  ~L3Journal();
  L3Journal(const L3Journal&) = delete;
  L3Journal& operator=(const L3Journal&) = delete;

  // Rebuilds a table from the journal at `path`. Pages whose slots end past `data_file_bytes`
  // (the data file was truncated, deleted or replaced) or past `n_slots` are left out and
  // counted. Throws k25::Error naming the reason when the file cannot be read or its header is
  // damaged, of another version, page size or content tag (the pages are then unusable).
  static L3JournalReplay replay(const std::string& path, uint64_t n_slots, uint32_t page_size,
                                uint64_t content_tag, uint64_t data_file_bytes);
  // The same over a journal's bytes (`path` names it in messages).
  static L3JournalReplay replay_bytes(const std::string& data, const std::string& path,
                                      uint64_t n_slots, uint32_t page_size, uint64_t content_tag,
                                      uint64_t data_file_bytes);

  // Replaces the file with a compacted one holding `table` (records buffered before are dropped:
  // the table includes them), durable before it returns, and appends to it from then on.
  // Throws k25::Error naming the path; the journal is then broken() until a rewrite succeeds.
  void rewrite(const L3PageTable& table);

  // Buffer one record; flush() appends them.
  void record_put(L3Key key, const L3Entry& entry);
  void record_erase(L3Key key);
  void record_touch(L3Key key);
  bool has_buffered() const { return !buffered_.empty(); }
  // Appends the buffered records with one write (process-crash safe once it returns 0).
  // 0 or -errno (when broken(): the errno that broke it); on failure, or when broken(), the
  // buffered records are dropped and the journal is broken() (a partial append is cut off).
  int flush();
  // fdatasync of what was appended since the last sync (power-loss safe); 0 or -errno.
  int sync();

  bool broken() const { return fd_ < 0; }
  int error() const { return error_; }  // errno of what broke it (0: never failed)
  // The file at path() is no longer the one being appended to (deleted or replaced).
  bool unlinked() const;
  uint64_t records_in_file() const { return records_in_file_; }
  const std::string& path() const { return path_; }

 private:
  void append_record(uint8_t op, L3Key key, const L3Entry& entry);
  void close_file();

  std::string path_;
  uint32_t page_size_;
  uint64_t content_tag_;
  int fd_ = -1;
  uint64_t file_bytes_ = 0;
  uint64_t records_in_file_ = 0;
  bool unsynced_ = false;
  int error_ = 0;
  std::string buffered_;
};

}  // namespace k25
