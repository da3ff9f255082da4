// Copyright 2026 the jaccl authors.
// Connecting the TCP data plane: who dials whom, how many wires, the
// concurrent acceptor, and the whole set-up from cards to the ControlBlock.
//
// Topology: every pair of ranks is connected. For size <= 16 each pair has
// `wires` data connections; for size > 16 ring neighbours (rank +- 1 mod
// size) have `wires` and every other pair 1. Every pair also has ONE control
// connection, owned by the liveness monitor, unless the caller's DataWiresFn
// leaves the pair out (a single-host shared-memory job connects rank 0 to
// each rank only, and rank 0 relays any rank's death to the others).
//
// Direction: for ranks i < j, i dials j if j listens, else j dials i if i
// listens; if neither listens (both JACCL_LISTEN=0) set-up fails with a
// ConfigError naming them. A rank with JACCL_LISTEN=0 opens no listening
// socket at all.
//
// Each connection runs the jaccl handshake (common/handshake.h) with channel
// Data (wire index) or Control and proves the job token. The accepting side
// drops, with a reason, any connection that is not one it expects (garbage,
// wrong token or job, a rank that should not dial it, a wire out of range or
// already connected) without disturbing the set-up. Without a job token a
// forged hello naming a real rank cannot be told apart: set JACCL_TOKEN on
// networks you do not trust.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "bootstrap/side_channel.h"
#include "common/handshake.h"
#include "common/net.h"
#include "jaccl/jaccl.h"
#include "transport/control_block.h"
#include "transport/tcp_card.h"

namespace jaccl::detail {

// Data connections between distinct ranks a and b.
int data_wires_between(int a, int b, int size, int wires);
// Wires per pair, from the cards alone so that every rank computes the same
// number: the cards' `wires` when any rank chose it (JACCL_WIRES /
// set_wires, or an older jaccl's card; exchange_cards makes them agree),
// else 2, or 1 when on some kernel the ranks that drive TCP wires (every
// rank, or with leaders_only the first of each shared-memory host), 2 wire
// threads each, would outnumber the CPUs the least of them may run on.
int default_tcp_wires(const std::vector<TcpCard>& cards,
                      bool leaders_only = false);
// Whether rank `from` dials rank `to` (listens[r]: rank r listens): the
// higher rank of a pair dials the lower one where that listens. A one-host
// job's control connections are a star at rank 0: every rank dials it from
// its own thread, and rank 0's one acceptor takes them all (rank 0 dialing
// made every rank start an acceptor thread and wake it, at ~0.1 ms a
// switch into one of 1024 processes on a VM).
bool dials(int from, int to, const std::vector<char>& listens);
// ConfigError (reported by rank me) if some pair has no listener.
void check_listen_pairs(const std::vector<char>& listens, int me);

// Serves a listening socket on its own thread: accepts, runs the server
// handshakes of all half-open connections at once (poll), validates them and
// keeps the expected ones, until every expected connection is in.
class TcpAcceptor {
 public:
  // expected_data[p] >= 0: p dials us with that many data wires plus one
  // control connection (none without with_control); -1: p must not dial us.
  TcpAcceptor(int rank, int size, Fd listener, std::string token,
              std::vector<int> expected_data, Deadline dl,
              bool with_control = true);
  ~TcpAcceptor();  // stops and joins
  TcpAcceptor(const TcpAcceptor&) = delete;
  TcpAcceptor& operator=(const TcpAcceptor&) = delete;

  // Blocks until complete, stopped or the deadline; true when complete.
  bool wait();
  void stop();
  // After wait(): the accepted sockets (data[p][w], control[p]).
  std::vector<std::vector<Fd>>& data() { return data_; }
  std::vector<Fd>& control() { return control_; }
  // Peers that still owe us a connection.
  std::vector<int> missing() const;
  // Connections dropped so far (strays), for tests and logs.
  int rejected() const { return rejected_.load(); }

 private:
  void run();
  Detail check(const Hello& h) const;

  int rank_;
  int size_;
  Fd listener_;
  std::string token_;
  uint64_t job_;
  std::vector<int> expected_;
  Deadline dl_;
  bool with_control_;
  std::vector<std::vector<Fd>> data_;
  std::vector<Fd> control_;
  int owed_ = 0;
  Fd stop_fd_;
  std::atomic<bool> done_{false};
  std::atomic<int> rejected_{0};
  mutable std::mutex mu_;
  std::thread thread_;
};

// Dials one connection to a peer that listens at addresses:port and runs
// the client handshake; retries refused or failed attempts until dl or
// *stop. Returns an invalid Fd on expiry; a rejection by the peer (token,
// config) is thrown.
Fd dial_peer(const std::vector<std::string>& addresses, uint16_t port,
             const Hello& hello, const std::string& token, const Deadline& dl,
             const std::atomic<bool>& stop, int rank);

// Decides from the gathered cards how many data wires each peer gets
// (wires[p]; 0: control connection only, shared memory carries that pair's
// data; -1: no connection at all). Both ends of a pair must compute the same
// number. Without it,
// data_wires_between() for every pair.
using DataWiresFn =
    std::function<std::vector<int>(const std::vector<TcpCard>& cards)>;

// The whole TCP set-up: listen (unless JACCL_LISTEN=0), exchange cards,
// connect every pair, barrier, start the liveness monitor (as keepalive).
// With `later` (a shrunk group, whose monitor takes its parent's control
// connections over: group/shrink.cpp) no control connections are made and
// no monitor started: the keepalive is `later`, where the caller puts the
// monitor once it has one.
// With monitor_later returning true (asked once the wires are planned), no
// barrier and no monitor: conns.start_monitor starts it, once the caller's
// own side-channel round has proved every rank connected (the
// shared-memory set-up's first gather; a round of every process less).
// Size 1: no sockets. ofi_card goes into this rank's card (TcpCard::ofi),
// for the ofi transport. Two side-channel calls (the cards in one, unless
// one is longer than SideChannel::inline_bytes() - 8, and the barrier); a
// caller that tears the channel down right after makes one more barrier
// (which proves every rank has left this one; see leave_barrier()).
// Sets conns.host_ranks, host_cpus and host_index from the cards (and logs
// them).
void count_host_cpus(const std::vector<TcpCard>& cards, int me,
                     ControlBlock& conns);

ControlBlock setup_tcp(const Config& cfg, SideChannel& sc,
                       const DataWiresFn& want_data = nullptr,
                       std::vector<std::string> ofi_card = {},
                       std::shared_ptr<MonitorSlot> later = nullptr,
                       const std::function<bool()>& monitor_later = nullptr);

}  // namespace jaccl::detail
