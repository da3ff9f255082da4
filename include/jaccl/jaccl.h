// Copyright 2026 the jaccl authors.
// jaccl: collective communication for distributed ML on ordinary Linux
// machines, source-compatible with MLX's standalone JACCL.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "jaccl/error.h"
#include "jaccl/group.h"
#include "jaccl/side_channel.h"
#include "jaccl/types.h"

namespace jaccl {

// What the user asked for. Setters record problems instead of throwing, so a
// config can be built from partial input and then asked why it is invalid
// (invalid_reason()); init(cfg, strict=true) throws that reason.
class Config {
 public:
  using DeviceMatrix = std::vector<std::vector<std::vector<std::string>>>;

  // The defaults, and the shared-memory settings of the environment
  // (JACCL_SHM_BUDGET, JACCL_SHM_STRATEGY), which every Config takes.
  Config();

  // ---- JACCL's setters ---------------------------------------------------
  Config& set_rank(const char* rank_str);  // parsed; "abc" is recorded
  Config& set_rank(int rank);
  Config& set_coordinator(const char* coordinator);
  Config& set_coordinator(std::string coordinator);
  Config& set_devices_from_file(const char* dev_file);
  Config& set_devices(DeviceMatrix devices);
  Config& prefer_ring(bool prefer = true);
  Config& set_all_gather(AllGatherFn agf);
  Config& set_all_gather_factory(AllGatherFactory factory);

  // ---- jaccl's setters -------------------------------------------------
  // Group size when there is no device matrix.
  Config& set_size(int size);
  // Bootstrap and connection set-up deadline (default 60 s).
  Config& set_timeout(std::chrono::milliseconds timeout);
  // Deadline of one blocking collective (default 600 s; 0 = none).
  Config& set_op_timeout(std::chrono::milliseconds timeout);
  // Shared job secret: every connection proves knowledge of it.
  Config& set_token(std::string token);
  // Data plane: whether this rank opens a listening socket (default true).
  Config& set_listen(bool listen);
  // Interface name or IP address the data plane listens on.
  Config& set_interface(std::string ifname_or_ip);
  // Data connections per neighbour (>= 1). Unset, each data plane takes its
  // own default: TCP 2, or 1 where a host's wire threads would outnumber its
  // CPUs; ofi 1 (its wires share one domain). See docs/data-planes.md.
  Config& set_wires(int wires);
  // "auto", "tcp", "shm" or "ofi" (libfabric for every pair).
  Config& set_transport(std::string transport);
  // libfabric provider of the ofi transport ("tcp;ofi_rxm", "shm",
  // "verbs;ofi_rxm", "efa"; "" = the best one found).
  Config& set_ofi_provider(std::string provider);
  // Test knob: register every ofi buffer even when the provider does not
  // require it (the path verbs and efa need).
  Config& set_ofi_force_register(bool on);
  // Silence after which a peer is declared lost (0 = off; default 10 s).
  Config& set_heartbeat_timeout(std::chrono::milliseconds timeout);
  // A built-in side channel by URI: tcp://host:port, file:///shared/dir,
  // redis://host:port[/prefix], mpi://. Precedence: factory > function >
  // this URI > coordinator.
  Config& set_side_channel(std::string uri);
  // Job id that namespaces the file and Redis side channels (default: from
  // the token, else "default").
  Config& set_job(std::string job);
  // Shared memory the ranks of one host may use for the shm data plane, in
  // MiB (1..1048576, default 64); every rank of a host must give the same.
  Config& set_shm_budget(size_t mib);
  // How the shm data plane's large ops store: "auto" (measured, the
  // default), "cached", "stream-stage", "stream" or "direct".
  Config& set_shm_strategy(std::string strategy);

  // ---- jaccl's setters: elastic groups (docs/failures.md) ----------------
  // Start as a newcomer to the grow that makes generation `generation`
  // (>= 1: the members' group's Group::generation() + 1): init() meets the
  // members' Group::grow through the grow channel (or the all-gather
  // factory / function, which then needs rank and size) and returns the
  // grown group. Rank and size may be left unset with a grow channel: the
  // newcomer takes the next free rank the members announce.
  Config& set_join(int generation);
  // Where grows meet (Group::grow, set_join): kv://host:port (the store
  // jaccl-run --elastic hosts), file:///shared/dir or redis://host[:port].
  // Unset, grows use the side channel when it is file:// or redis://.
  Config& set_grow_channel(std::string uri);

  // ---- validity ----------------------------------------------------------
  bool is_valid_mesh() const;
  bool is_valid_ring() const;
  // Rank, size and a way to bootstrap (coordinator, side-channel URI,
  // function or factory) are present and nothing recorded is wrong.
  bool is_valid() const;
  // Why the config is not valid ("" when it is).
  std::string invalid_reason() const;
  // What is wrong with the shared-memory settings ("" when nothing). Not in
  // invalid_reason(): the shared-memory set-up raises it on every rank of
  // the job at once (ConfigError), so a value one rank got wrong fails all
  // ranks alike instead of leaving the others waiting for that rank.
  std::string shm_invalid_reason() const;

  // ---- getters -------------------------------------------------------------
  int get_rank() const { return rank_; }
  int get_size() const { return size_; }
  std::string get_coordinator() const { return coordinator_; }
  bool get_prefer_ring() const { return prefer_ring_; }
  const DeviceMatrix& get_devices() const { return devices_; }
  const AllGatherFn& get_all_gather() const { return all_gather_fn_; }
  const AllGatherFactory& get_all_gather_factory() const {
    return all_gather_factory_;
  }
  std::chrono::milliseconds get_timeout() const { return timeout_; }
  std::chrono::milliseconds get_op_timeout() const { return op_timeout_; }
  std::chrono::milliseconds get_heartbeat_timeout() const {
    return heartbeat_timeout_;
  }
  const std::string& get_token() const { return token_; }
  bool get_listen() const { return listen_; }
  const std::string& get_interface() const { return interface_; }
  int get_wires() const { return wires_; }
  // Whether set_wires (or JACCL_WIRES) chose the wire count.
  bool get_wires_set() const { return wires_set_; }
  const std::string& get_transport() const { return transport_; }
  const std::string& get_ofi_provider() const { return ofi_provider_; }
  bool get_ofi_force_register() const { return ofi_force_register_; }
  const std::string& get_side_channel() const { return side_channel_; }
  const std::string& get_job() const { return job_; }
  size_t get_shm_budget() const { return shm_budget_; }  // MiB
  const std::string& get_shm_strategy() const { return shm_strategy_; }
  int get_join() const { return join_; }  // -1: not joining
  const std::string& get_grow_channel() const { return grow_channel_; }

  // Reads the environment table (docs/environment.md). Never throws: malformed
  // values are recorded and reported by invalid_reason(), naming the variable.
  static Config from_env();

 private:
  void record(std::string problem);
  void update_size();

  int rank_ = -1;
  int size_ = 0;
  int explicit_size_ = 0;
  std::string coordinator_;
  DeviceMatrix devices_;
  bool prefer_ring_ = false;
  AllGatherFn all_gather_fn_;
  AllGatherFactory all_gather_factory_;
  std::chrono::milliseconds timeout_{60000};
  std::chrono::milliseconds op_timeout_{600000};
  std::chrono::milliseconds heartbeat_timeout_{10000};
  std::string token_;
  bool listen_ = true;
  std::string interface_;
  int wires_ = 2;
  bool wires_set_ = false;
  std::string transport_ = "auto";
  std::string ofi_provider_;
  bool ofi_force_register_ = false;
  std::string side_channel_;
  std::string job_;
  size_t shm_budget_ = 64;
  std::string shm_strategy_ = "auto";
  int join_ = -1;
  std::string grow_channel_;
  std::vector<std::string> problems_;
  std::vector<std::string> shm_problems_;  // shm_invalid_reason()
};

// Whether this build can create groups here (always true on Linux: the TCP
// data plane needs nothing special).
bool is_available();

// Group from the environment (Config::from_env). Non-strict returns nullptr
// when the config is incomplete or invalid; strict throws ConfigError with
// the reason. Failures after a valid config (a peer missing, a timeout)
// always throw.
std::shared_ptr<Group> init(bool strict = false);

// Same, with a side channel built by factory(rank, size), called once.
std::shared_ptr<Group> init(bool strict, AllGatherFactory factory);

// Group from an explicit Config.
std::shared_ptr<Group> init(const Config& cfg, bool strict = false);

}  // namespace jaccl
