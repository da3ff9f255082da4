// Copyright 2026 the jaccl authors.
// The operating-system limits a TCP star meets at scale, checked before they
// bite and named when they do: the open-file limit (one descriptor per rank
// at rank 0, one per thread-rank in a process), the listen backlog
// (net.core.somaxconn caps it; a burst of dials beyond it loses SYNs, and
// each lost SYN costs the dialing rank a second), and the kernel's counters
// of listen-queue overflows that tell a slow start from a full queue.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace jaccl::detail::star {

// Makes sure this process can open `more` descriptors on top of those open
// now: raises the soft RLIMIT_NOFILE (never past the hard one) when it is
// short, else throws an Io error that says who needs them and what to raise.
void ensure_fd_room(size_t more, const std::string& who, int rank);

// Grows this process's descriptor table at once to hold `more` descriptors
// beyond the lowest free one (within the soft limit), by duplicating fd. The
// kernel doubles the table as descriptors are opened, and in a process with
// threads each doubling waits for an RCU grace period while every socket() and
// accept() of the process waits for it: 4096 thread-ranks stalled on up to
// eight of them. Best effort: the table stays as it was when this fails.
void reserve_fd_table(int fd, size_t more);

// The backlog rank 0 asks listen() for (the kernel caps it at somaxconn).
int listen_backlog(int size);

// net.core.somaxconn, net.ipv4.tcp_max_syn_backlog, net.ipv4.tcp_syncookies
// (-1 when unreadable).
struct ListenSysctls {
  int somaxconn = -1;
  int max_syn_backlog = -1;
  int syncookies = -1;
};
ListenSysctls read_listen_sysctls();

// "" when the kernel lets `size - 1` ranks dial at once; else a sentence on
// what overflows and what to raise.
std::string backlog_note(int size, const ListenSysctls& s);

// The kernel's (system-wide) counts of connections dropped at a listener:
// TcpExtListenOverflows (accept queue full) and TcpExtListenDrops.
struct ListenDrops {
  bool known = false;
  uint64_t overflows = 0;
  uint64_t drops = 0;
};
ListenDrops read_listen_drops();

// What a timeout waiting for dials should add: the drops since `before` and
// the settings to raise; "" when the kernel dropped nothing meanwhile.
std::string listen_drop_hint(const ListenDrops& before, int size);

}  // namespace jaccl::detail::star
