// Copyright 2026 the jaccl authors.
// jaccl-run's output: the ranks' lines, prefixed with "[rank] ", queued for
// our stdout/stderr without ever blocking the supervision loop.
//
// A Sink is one of our standard streams. When it is a pipe we write to it
// through a fresh non-blocking open file description (/proc/self/fd/N), so
// a reader that stalls (a paused pager) never blocks jaccl-run: output
// queues, and past kSinkHigh the loop stops reading the ranks' pipes, so
// the ranks block on their writes as they would without us. Files and
// terminals are written as before (blocking).
#pragma once

#include <cstddef>
#include <functional>
#include <string>

namespace jaccl::run {

// Queued bytes above which the ranks' pipes are no longer read.
constexpr size_t kSinkHigh = 8 << 20;

class Sink {
 public:
  explicit Sink(int fd);
  Sink(const Sink&) = delete;
  Sink& operator=(const Sink&) = delete;

  // Queues s and writes what the stream takes now.
  void put(const std::string& s);
  // Writes what the stream takes now (after POLLOUT).
  void flush_some();
  // Writes everything, waiting for the reader; gives up when the stream
  // breaks, or when wake_fd turns readable and give_up() says so.
  void flush_all(int wake_fd = -1,
                 const std::function<bool()>& give_up = nullptr);

  int fd() const { return fd_; }
  bool pending() const { return ok_ && off_ < buf_.size(); }
  bool full() const { return ok_ && buf_.size() - off_ > kSinkHigh; }

 private:
  int fd_;
  bool ok_ = true;  // false once the reader is gone (EPIPE)
  std::string buf_;
  size_t off_ = 0;
};

Sink& out_sink();  // our stdout
Sink& err_sink();  // our stderr

// One of a rank's output pipes, re-emitted line by line with a prefix.
struct Stream {
  int fd = -1;  // read end, -1 once closed
  Sink* dest = nullptr;
  std::string prefix;
  std::string partial;  // bytes after the last newline
  // While set, a line starting with it is taken out of the output (the
  // remote shell's "started" line) and the rest of it kept in `marker_rest`.
  std::string marker;
  bool marker_seen = false;
  std::string marker_rest;
  // The last complete line, kept for error messages (ssh's complaint).
  std::string last_line;

  // Emits every complete line in data (plus what was pending).
  void emit(const char* data, size_t n);
  // One read of what is available now, closing the pipe at EOF. With
  // `drain` (the process exited), reads what is left (bounded) and closes
  // the pipe even if a grandchild still holds it open.
  void pump(bool drain);
  void close();
};

}  // namespace jaccl::run
