// Copyright 2026 the jaccl authors.
// Handing a host's shared-memory segment (a memfd) from the rank that
// created it to the other local ranks, over a Linux abstract unix socket.
//
// An abstract socket has no file system name and vanishes with its owner,
// so nothing is left behind whenever anyone dies. Its name carries the
// per-job nonce published through the side channel, but abstract names are
// listed in /proc/net/unix for everyone in the network namespace, so the
// name is not the secret:
//
//   client -> Hello   magic, version, rank, secret (16 bytes, published
//                     through the side channel next to the nonce)
//   server -> Grant   magic, segment bytes, and the memfd (SCM_RIGHTS)
//
// The server checks SO_PEERCRED first (same uid; the pid the rank
// published, when both share a pid namespace) and then the Hello; anything
// else is closed without a word and without disturbing set-up. The client
// checks the server's SO_PEERCRED the same way, so a process squatting the
// name in another network namespace is not mistaken for the creator.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <string>
#include <vector>

#include "common/deadline.h"
#include "common/handshake.h"
#include "common/net.h"

namespace jaccl::detail {

class FailureState;

using HandoffSecret = Nonce;

// A process expected at the other end: its job rank and pid (0: unknown,
// e.g. in another pid namespace, not checked).
struct HandoffPeer {
  int rank = -1;
  pid_t pid = 0;
};

// "\0<name>" as a sockaddr_un; name is at most 100 bytes.
// Binds and listens (non-blocking, close-on-exec). An Io error on failure.
Fd handoff_listen(const std::string& name, int backlog, int rank);

// Passes seg_fd (bytes long) to every peer in `members` that proves itself,
// until each has it. Expiry of dl is a Timeout naming the ranks that never
// collected it; a failure recorded in `state` (e.g. a peer died) is thrown
// as soon as it happens. state may be null.
void handoff_serve(int listen_fd, const std::string& name, int seg_fd,
                   uint64_t bytes, const HandoffSecret& secret,
                   const std::vector<HandoffPeer>& members, int rank,
                   const Deadline& dl, const FailureState* state);

// One connection attempt to the creator's socket.
struct HandoffConn {
  enum class Reach { Connected, Busy, Unreachable };
  Reach reach = Reach::Unreachable;
  Fd fd;          // Connected
  int error = 0;  // Unreachable: errno, EPERM for a server that is not
                  // the creator
};
// Non-blocking: Busy when the listener's backlog is full (retry later),
// Unreachable when nothing (or an impostor) listens under the name here.
HandoffConn handoff_connect(const std::string& name, const HandoffPeer& server,
                            int rank);

// Completes the exchange on conn (connecting first, with retries, if it was
// Busy) and returns the memfd; *bytes receives its announced size. Bounded by
// dl (Timeout naming the server); a server that closes without granting is
// PeerLost naming it.
Fd handoff_receive(HandoffConn& conn, const std::string& name,
                   const HandoffPeer& server, const HandoffSecret& secret,
                   int rank, const Deadline& dl, const FailureState* state,
                   uint64_t* bytes);

}  // namespace jaccl::detail
