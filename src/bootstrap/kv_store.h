// Copyright 2026 the jaccl authors.
// A rendezvous store (store_channel.h) served over TCP by a process that is
// not a rank: jaccl-run --elastic hosts one (KvServer) for the grows of a
// job, so their rendezvous survives any rank, rank 0 too. The URI is
// kv://host:port (Config::set_grow_channel, JACCL_GROW_CHANNEL).
//
// Wire: every message is magic u32, op u8, 3 bytes zero, count u32, then
// count strings (length u32, bytes; length 0xffffffff = absent). The
// client's first request is Hello with the job token's fingerprint; a
// server of another job (or token) answers with an error and closes. Then
// Put(ns/key, value), Get(ns/key...), Del(ns/key...), List(ns/) each get one
// reply of the same shape (op Ok or Err, an Err's only string says why).
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "bootstrap/store_channel.h"
#include "common/deadline.h"
#include "common/net.h"

namespace jaccl::detail {

// The namespace `ns` of the store at host:port; connects now (retrying
// until timeout: the launcher may still be starting it). Errors name the
// address and `rank`.
std::shared_ptr<RendezvousStore> make_kv_store(const std::string& host_port,
                                               const std::string& ns,
                                               const std::string& token,
                                               Millis timeout, int rank);

// The server: listens on `bind` (host:port, port 0 = any) and serves from a
// thread of its own until destroyed. A client that stalls mid-request is
// dropped after a second, so one stuck process cannot hold up the others.
class KvServer {
 public:
  KvServer(const std::string& bind, const std::string& token);
  ~KvServer();
  KvServer(const KvServer&) = delete;
  KvServer& operator=(const KvServer&) = delete;

  // host:port the clients dial.
  const std::string& address() const { return address_; }
  // Keys held now (for tests: a store that only grows would leak).
  size_t keys() const;

  struct State;

 private:
  std::string address_;
  std::shared_ptr<State> state_;
  Fd wake_;  // write end of the pipe that stops the thread
  std::thread thread_;
};

}  // namespace jaccl::detail
