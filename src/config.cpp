// Copyright 2026 the jaccl authors.
// Config: the builder and its validation (config_env.cpp: from_env).
#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string_view>

#include "bootstrap/pmix_channel.h"
#include "bootstrap/uri.h"
#include "collectives/shm_strategy.h"
#include "common/env.h"
#include "common/log.h"
#include "common/net.h"
#include "config_parse.h"
#include "group/grow.h"
#include "jaccl/jaccl.h"

namespace jaccl {

using detail::EnvVar;
using detail::kMaxShmBudgetMib;
using detail::kShmStrategies;
using detail::parse_int;

namespace {

// The device matrix JSON: size rows of size entries, each null, a device
// name or a list of names.
Config::DeviceMatrix parse_devices(const nlohmann::json& devices,
                                   const std::string& where) {
  if (!devices.is_array()) {
    throw std::invalid_argument(where + ": the device file must hold an array");
  }
  Config::DeviceMatrix out(devices.size());
  for (size_t r = 0; r < devices.size(); ++r) {
    const auto& row = devices[r];
    if (!row.is_array()) {
      throw std::invalid_argument(where + ": row " + std::to_string(r) +
                                  " is not an array");
    }
    out[r].resize(row.size());
    for (size_t c = 0; c < row.size(); ++c) {
      const auto& e = row[c];
      if (e.is_string()) {
        out[r][c].push_back(e.get<std::string>());
      } else if (e.is_array()) {
        for (const auto& name : e) {
          if (!name.is_string()) {
            throw std::invalid_argument(
                where + ": entry [" + std::to_string(r) + "][" +
                std::to_string(c) + "] holds a non-string device name");
          }
          out[r][c].push_back(name.get<std::string>());
        }
      } else if (!e.is_null()) {
        throw std::invalid_argument(
            where + ": entry [" + std::to_string(r) + "][" + std::to_string(c) +
            "] must be null, a device name or a list of names");
      }
    }
  }
  return out;
}

}  // namespace

void Config::record(std::string problem) {
  problems_.push_back(std::move(problem));
}

void Config::update_size() {
  if (!devices_.empty()) {
    size_ = static_cast<int>(devices_.size());
  } else {
    size_ = explicit_size_;
  }
}

Config& Config::set_rank(int rank) {
  rank_ = rank;
  return *this;
}

Config& Config::set_rank(const char* rank_str) {
  auto v = rank_str ? parse_int(rank_str) : std::nullopt;
  if (!v || *v < 0 || *v > INT32_MAX) {
    record(std::string("rank '") + (rank_str ? rank_str : "(null)") +
           "' is not a non-negative integer");
    return *this;
  }
  rank_ = static_cast<int>(*v);
  return *this;
}

Config& Config::set_coordinator(std::string coordinator) {
  coordinator_ = std::move(coordinator);
  return *this;
}

Config& Config::set_coordinator(const char* coordinator) {
  return set_coordinator(std::string(coordinator ? coordinator : ""));
}

Config& Config::set_devices(DeviceMatrix devices) {
  devices_ = std::move(devices);
  for (size_t r = 0; r < devices_.size(); ++r) {
    if (devices_[r].size() != devices_.size()) {
      record("the device matrix must be square: it has " +
             std::to_string(devices_.size()) + " rows but row " +
             std::to_string(r) + " has " + std::to_string(devices_[r].size()) +
             " entries");
      break;
    }
  }
  update_size();
  return *this;
}

Config& Config::set_devices_from_file(const char* dev_file) {
  std::string path = dev_file ? dev_file : "";
  std::ifstream f(path);
  if (!f) {
    record("cannot read the device file '" + path + "'");
    return *this;
  }
  try {
    auto j = nlohmann::json::parse(f);
    return set_devices(parse_devices(j, "device file '" + path + "'"));
  } catch (const nlohmann::json::exception& e) {
    record("the device file '" + path + "' is not valid JSON: " + e.what());
  } catch (const std::invalid_argument& e) {
    record(e.what());
  }
  return *this;
}

Config& Config::prefer_ring(bool prefer) {
  prefer_ring_ = prefer;
  return *this;
}

Config& Config::set_all_gather(AllGatherFn agf) {
  all_gather_fn_ = std::move(agf);
  return *this;
}

Config& Config::set_all_gather_factory(AllGatherFactory factory) {
  all_gather_factory_ = std::move(factory);
  return *this;
}

Config& Config::set_size(int size) {
  explicit_size_ = size;
  update_size();
  return *this;
}

Config& Config::set_timeout(std::chrono::milliseconds t) {
  timeout_ = t;
  return *this;
}

Config& Config::set_op_timeout(std::chrono::milliseconds t) {
  op_timeout_ = t;
  return *this;
}

Config& Config::set_heartbeat_timeout(std::chrono::milliseconds t) {
  heartbeat_timeout_ = t;
  return *this;
}

Config& Config::set_token(std::string token) {
  token_ = std::move(token);
  return *this;
}

Config& Config::set_listen(bool listen) {
  listen_ = listen;
  return *this;
}

Config& Config::set_interface(std::string ifname_or_ip) {
  interface_ = std::move(ifname_or_ip);
  return *this;
}

Config& Config::set_wires(int wires) {
  wires_ = wires;
  wires_set_ = true;
  return *this;
}

Config& Config::set_side_channel(std::string uri) {
  side_channel_ = std::move(uri);
  // pmix:// knows rank and size: take PMIx's where none was given.
  if (side_channel_.rfind("pmix://", 0) == 0 && (rank_ < 0 || size_ < 1)) {
    int r = -1, n = 0;
    try {
      if (detail::pmix_rank_size(&r, &n)) {
        if (rank_ < 0)
          set_rank(r);
        if (size_ < 1)
          set_size(n);
      }
    } catch (const Error& e) {
      record(std::string(e.what()).substr(8));  // drop "[jaccl] "
    }
  }
  return *this;
}

Config& Config::set_job(std::string job) {
  job_ = std::move(job);
  return *this;
}

Config& Config::set_transport(std::string transport) {
  transport_ = std::move(transport);
  return *this;
}

Config& Config::set_ofi_provider(std::string provider) {
  ofi_provider_ = std::move(provider);
  return *this;
}

Config& Config::set_ofi_force_register(bool on) {
  ofi_force_register_ = on;
  return *this;
}

Config& Config::set_shm_budget(size_t mib) {
  if (mib < 1 || mib > kMaxShmBudgetMib) {
    shm_problems_.push_back("a shared-memory budget of " + std::to_string(mib) +
                            " MiB is not in 1..1048576");
    return *this;
  }
  shm_budget_ = mib;
  return *this;
}

Config& Config::set_join(int generation) {
  if (generation < 1) {
    record("the generation to join must be >= 1, got " +
           std::to_string(generation));
    return *this;
  }
  join_ = generation;
  return *this;
}

Config& Config::set_grow_channel(std::string uri) {
  grow_channel_ = std::move(uri);
  return *this;
}

Config& Config::set_shm_strategy(std::string strategy) {
  detail::ShmStrategy s{};
  if (!detail::parse_shm_strategy(strategy.c_str(), &s)) {
    shm_problems_.push_back("shared-memory strategy '" + strategy +
                            "' is not one of " + kShmStrategies);
    return *this;
  }
  shm_strategy_ = std::move(strategy);
  return *this;
}

std::string Config::shm_invalid_reason() const {
  std::string out;
  for (size_t i = 0; i < shm_problems_.size(); ++i) {
    out += (i ? "; " : "") + shm_problems_[i];
  }
  return out;
}

static bool names_any_device(const Config::DeviceMatrix& m) {
  for (const auto& row : m) {
    for (const auto& cell : row) {
      if (!cell.empty())
        return true;
    }
  }
  return false;
}

bool Config::is_valid_mesh() const {
  if (size_ < 1)
    return false;
  if (devices_.empty())
    return true;  // TCP reaches every peer
  for (int s = 0; s < size_; ++s) {
    if (devices_[s].size() != static_cast<size_t>(size_))
      return false;
  }
  // A square matrix naming no device (what a machine without RDMA writes:
  // it only gives the size): TCP and shared memory reach every peer.
  if (!names_any_device(devices_))
    return true;
  for (int s = 0; s < size_; ++s) {
    for (int d = 0; d < size_; ++d) {
      bool has = !devices_[s][d].empty();
      if ((s == d && has) || (s != d && !has))
        return false;
    }
  }
  return true;
}

bool Config::is_valid_ring() const {
  if (size_ < 1)
    return false;
  if (devices_.empty())
    return true;
  // Square first: the wire count below reads row 0, which may be short.
  for (const auto& row : devices_) {
    if (row.size() != static_cast<size_t>(size_))
      return false;
  }
  if (size_ == 1)
    return true;
  size_t wires = devices_[0][1].size();
  if (wires == 0)
    return false;
  for (int s = 0; s < size_; ++s) {
    int left = (s + size_ - 1) % size_, right = (s + 1) % size_;
    if (devices_[s][left].size() != wires ||
        devices_[s][right].size() != wires) {
      return false;
    }
  }
  return true;
}

namespace {

// Under srun or a PMIx launcher: what to do about a missing side channel.
std::string launcher_hint() {
  const bool built = detail::pmix_channel_built();
  if (detail::env_get(EnvVar::PmixNamespace) && !built) {
    return "; a PMIx launcher started this process but this build has no "
           "pmix:// side channel: install libpmix-dev and reconfigure, or set "
           "JACCL_SIDE_CHANNEL (file:///shared/dir, redis://host, mpi://) or "
           "JACCL_COORDINATOR";
  }
  if (!detail::env_get(EnvVar::SlurmRank) ||
      detail::env_get(EnvVar::PmixNamespace)) {
    return "";
  }
  if (built) {
    return "; under srun, run `srun --mpi=pmix` (jaccl then uses the "
           "pmix:// side channel by itself) or set JACCL_SIDE_CHANNEL "
           "(file:///shared/dir, redis://host) or JACCL_COORDINATOR";
  }
  return "; under srun, set JACCL_SIDE_CHANNEL (file:///shared/dir, "
         "redis://host) or JACCL_COORDINATOR (this build has no pmix:// side "
         "channel: install libpmix-dev and reconfigure to use `srun "
         "--mpi=pmix`)";
}

}  // namespace

std::string Config::invalid_reason() const {
  std::vector<std::string> why = problems_;
  // Whether from_env already recorded this problem with the variable's name.
  auto mentions = [&](const std::string& part) {
    return std::any_of(problems_.begin(), problems_.end(),
                       [&](const std::string& p) {
                         return p.find(part) != std::string::npos;
                       });
  };
  // A newcomer meeting a grow through a store may learn rank and size there.
  const bool join_by_store =
      join_ >= 0 && !all_gather_fn_ && !all_gather_factory_;
  if (join_by_store && rank_ < 0 && size_ < 1) {
    // nothing to check
  } else if (size_ < 1 && explicit_size_ == 0 && devices_.empty()) {
    why.push_back(
        "no group size: set JACCL_SIZE (or MLX_WORLD_SIZE), Config::set_size "
        "or a device file (JACCL_IBV_DEVICES)");
  } else if (size_ < 1) {
    why.push_back("group size must be >= 1, got " + std::to_string(size_));
  }
  if (explicit_size_ != 0 && !devices_.empty() &&
      explicit_size_ != static_cast<int>(devices_.size())) {
    why.push_back("the size " + std::to_string(explicit_size_) +
                  " disagrees with the device matrix of " +
                  std::to_string(devices_.size()) + " ranks");
  }
  if (rank_ < 0 && join_by_store) {
    // learned from the grow
  } else if (rank_ < 0) {
    why.push_back("no rank: set JACCL_RANK (or MLX_RANK) or Config::set_rank");
  } else if (size_ >= 1 && rank_ >= size_ &&
             !mentions(" is out of range for group size " +
                       std::to_string(size_))) {
    why.push_back("rank " + std::to_string(rank_) +
                  " is out of range for group size " + std::to_string(size_));
  }
  if (join_by_store) {
    if (detail::grow_channel_uri(*this).empty()) {
      why.push_back(
          "joining a grow (JACCL_JOIN / Config::set_join) needs a grow "
          "channel: JACCL_GROW_CHANNEL or Config::set_grow_channel (kv://, "
          "file:// or redis://), a file:// or redis:// side channel, or an "
          "all-gather factory");
    }
  } else if (coordinator_.empty() && side_channel_.empty() && !all_gather_fn_ &&
             !all_gather_factory_) {
    why.push_back(
        "no way to bootstrap: give a coordinator address (JACCL_COORDINATOR/"
        "MLX_JACCL_COORDINATOR or Config::set_coordinator), a side-channel "
        "URI (JACCL_SIDE_CHANNEL or Config::set_side_channel), an all-gather "
        "function (Config::set_all_gather) or an all-gather factory "
        "(Config::set_all_gather_factory or init(strict, factory))" +
        launcher_hint());
  } else if (!coordinator_.empty() && side_channel_.empty() &&
             !all_gather_fn_ && !all_gather_factory_ &&
             !mentions("='" + coordinator_ + "' is not host:port")) {
    try {
      detail::parse_host_port(coordinator_, "coordinator");
    } catch (const Error& e) {
      why.push_back(std::string(e.what()).substr(8));  // drop "[jaccl] "
    }
  }
  if (!side_channel_.empty() && !all_gather_fn_ && !all_gather_factory_) {
    try {
      detail::parse_side_channel_uri(side_channel_);
    } catch (const Error& e) {
      why.push_back(std::string(e.what()).substr(8));
    }
  }
  if (!devices_.empty() && problems_.empty() && !is_valid_mesh() &&
      !is_valid_ring()) {
    why.push_back("the device matrix forms neither a valid mesh nor a ring");
  }
  if (wires_ < 1 || wires_ > 64) {
    why.push_back("wires must be in 1..64, got " + std::to_string(wires_));
  }
  if (transport_ != "auto" && transport_ != "tcp" && transport_ != "shm" &&
      transport_ != "ofi") {
    why.push_back("transport must be auto, tcp, shm or ofi, got '" +
                  transport_ + "'");
  }
  if (timeout_.count() <= 0) {
    why.push_back("the set-up timeout must be positive");
  }
  std::string out;
  for (size_t i = 0; i < why.size(); ++i) {
    out += (i ? "; " : "") + why[i];
  }
  return out;
}

bool Config::is_valid() const {
  return invalid_reason().empty();
}

}  // namespace jaccl
