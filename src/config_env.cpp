// Copyright 2026 the jaccl authors.
// Config::from_env: the environment table (common/env.h,
// docs/environment.md) read into a Config.
#include <cmath>
#include <string>
#include <string_view>

#include "bootstrap/mpi_channel.h"
#include "bootstrap/pmix_channel.h"
#include "collectives/shm_strategy.h"
#include "common/env.h"
#include "common/log.h"
#include "common/net.h"
#include "config_parse.h"
#include "jaccl/jaccl.h"

namespace jaccl {

using detail::EnvVar;
using detail::kMaxShmBudgetMib;
using detail::kShmStrategies;
using detail::parse_int;

namespace {

// A number of seconds >= 0, finite and at most ~30 years (so the conversion
// to milliseconds cannot overflow); nullopt on anything else ("nan", "inf",
// "-1", "abc", "5s").
std::optional<double> parse_seconds(std::string_view s) {
  try {
    size_t used = 0;
    double v = std::stod(std::string(s), &used);
    if (used != s.size() || !std::isfinite(v) || v < 0 || v > 1e9)
      return std::nullopt;
    return v;
  } catch (...) {
    return std::nullopt;
  }
}

// Seconds to milliseconds, rounding up so a positive value never becomes 0
// (which means "no limit" for the operation and heartbeat timeouts).
std::chrono::milliseconds seconds_to_ms(double s) {
  return std::chrono::milliseconds(static_cast<long long>(std::ceil(s * 1000)));
}

bool parse_flag(std::string_view s) {
  return !(s.empty() || s == "0" || s == "false" || s == "no" || s == "off");
}

}  // namespace

// The shared-memory settings come from the environment for every Config,
// not only from_env's (docs/environment.md, "Who reads what").
Config::Config() {
  if (const char* v = detail::env_get(EnvVar::ShmBudget)) {
    auto mib = parse_int(v);
    if (!mib || *mib < 1 || static_cast<size_t>(*mib) > kMaxShmBudgetMib) {
      shm_problems_.push_back(detail::env_describe(EnvVar::ShmBudget) +
                              " is not a number of MiB in 1..1048576");
    } else {
      set_shm_budget(static_cast<size_t>(*mib));
    }
  }
  if (const char* v = detail::env_get(EnvVar::ShmStrategy)) {
    detail::ShmStrategy s{};
    if (!detail::parse_shm_strategy(v, &s)) {
      shm_problems_.push_back(detail::env_describe(EnvVar::ShmStrategy) +
                              " is not one of " + kShmStrategies);
    } else {
      set_shm_strategy(v);
    }
  }
}

Config Config::from_env() {
  Config cfg;
  auto get = [](EnvVar v) { return detail::env_get(v); };

  // Rank and size: JACCL_* / MLX_* first, then the launcher's variables
  // (Open MPI, PMI, Slurm), in that order, as a pair from one launcher.
  const EnvVar rank_vars[] = {EnvVar::Rank, EnvVar::OmpiRank, EnvVar::PmiRank,
                              EnvVar::SlurmRank};
  const EnvVar size_vars[] = {EnvVar::Size, EnvVar::OmpiSize, EnvVar::PmiSize,
                              EnvVar::SlurmSize};
  EnvVar rank_from = EnvVar::Rank, size_from_var = EnvVar::Size;
  for (EnvVar v : rank_vars) {
    if (!get(v))
      continue;
    rank_from = v;
    auto r = parse_int(get(v));
    if (!r || *r < 0 || *r > INT32_MAX) {
      cfg.record(detail::env_describe(v) + " is not a non-negative integer");
    } else {
      cfg.set_rank(static_cast<int>(*r));
    }
    break;
  }
  for (EnvVar v : size_vars) {
    if (!get(v))
      continue;
    size_from_var = v;
    auto n = parse_int(get(v));
    if (!n || *n < 1 || *n > INT32_MAX) {
      cfg.record(detail::env_describe(v) + " is not a positive integer");
    } else {
      cfg.set_size(static_cast<int>(*n));
    }
    break;
  }
  if (get(EnvVar::IbvDevices)) {
    size_t before = cfg.problems_.size();
    cfg.set_devices_from_file(get(EnvVar::IbvDevices));
    // Name the variable and its value (the path), whichever problem it was.
    for (size_t i = before; i < cfg.problems_.size(); ++i) {
      cfg.problems_[i] =
          detail::env_describe(EnvVar::IbvDevices) + ": " + cfg.problems_[i];
    }
  }
  if (get(EnvVar::Coordinator)) {
    cfg.set_coordinator(get(EnvVar::Coordinator));
    try {
      detail::parse_host_port(cfg.coordinator_,
                              detail::env_source_name(EnvVar::Coordinator));
    } catch (const Error& e) {
      cfg.record(std::string(e.what()).substr(8));
    }
  }
  // A rank outside the group is reported here too, naming the variables
  // that set both (invalid_reason() then skips its generic message).
  if (cfg.rank_ >= 0 && cfg.size_ >= 1 && cfg.rank_ >= cfg.size_) {
    std::string size_from =
        !cfg.devices_.empty()
            ? "the device matrix of " + detail::env_describe(EnvVar::IbvDevices)
            : detail::env_describe(size_from_var);
    cfg.record(detail::env_describe(rank_from) +
               " is out of range for group size " + std::to_string(cfg.size_) +
               " (from " + size_from + ")");
  }
  if (get(EnvVar::SideChannel)) {
    cfg.set_side_channel(get(EnvVar::SideChannel));
    // Under mpirun with mpi://, MPI itself knows rank and size.
    if (cfg.side_channel_.rfind("mpi://", 0) == 0 &&
        (cfg.rank_ < 0 || cfg.size_ < 1)) {
      int r = -1, n = 0;
      if (detail::mpi_rank_size(&r, &n)) {
        if (cfg.rank_ < 0)
          cfg.set_rank(r);
        if (cfg.size_ < 1)
          cfg.set_size(n);
      }
    }
  }
  // Started by a PMIx launcher (srun --mpi=pmix, mpirun) and nothing named:
  // its PMIx server is the side channel.
  if (!get(EnvVar::SideChannel) && !get(EnvVar::Coordinator) &&
      get(EnvVar::PmixNamespace) && detail::pmix_channel_built()) {
    JACCL_LOG(Info, "rank " << cfg.rank_
                            << ": no coordinator or side channel named and "
                               "PMIx launched this process (PMIX_NAMESPACE="
                            << get(EnvVar::PmixNamespace)
                            << "): using side channel pmix://");
    cfg.set_side_channel("pmix://");
  }
  if (get(EnvVar::Job))
    cfg.set_job(get(EnvVar::Job));
  if (get(EnvVar::GrowChannel))
    cfg.set_grow_channel(get(EnvVar::GrowChannel));
  if (get(EnvVar::Join)) {
    auto g = parse_int(get(EnvVar::Join));
    if (!g || *g < 1 || *g > INT32_MAX) {
      cfg.record(detail::env_describe(EnvVar::Join) +
                 " is not a generation >= 1");
    } else {
      cfg.set_join(static_cast<int>(*g));
    }
  }
  if (get(EnvVar::Ring)) {
    cfg.prefer_ring(parse_flag(get(EnvVar::Ring)));
  }
  auto seconds = [&](EnvVar v, auto setter, bool allow_zero) {
    if (!get(v))
      return;
    auto s = parse_seconds(get(v));
    if (!s || (!allow_zero && *s == 0)) {
      cfg.record(detail::env_describe(v) +
                 (allow_zero ? " is not a number of seconds >= 0"
                             : " is not a number of seconds > 0"));
      return;
    }
    (cfg.*setter)(seconds_to_ms(*s));
  };
  seconds(EnvVar::Timeout, &Config::set_timeout, false);
  seconds(EnvVar::OpTimeout, &Config::set_op_timeout, true);
  seconds(EnvVar::HeartbeatTimeout, &Config::set_heartbeat_timeout, true);
  if (get(EnvVar::Token))
    cfg.set_token(get(EnvVar::Token));
  if (get(EnvVar::Listen))
    cfg.set_listen(parse_flag(get(EnvVar::Listen)));
  if (get(EnvVar::Ifname))
    cfg.set_interface(get(EnvVar::Ifname));
  if (get(EnvVar::Wires)) {
    auto v = parse_int(get(EnvVar::Wires));
    if (!v || *v < 1 || *v > 64) {
      cfg.record(detail::env_describe(EnvVar::Wires) +
                 " is not an integer in 1..64");
    } else {
      cfg.set_wires(static_cast<int>(*v));
    }
  }
  if (get(EnvVar::Transport)) {
    std::string t = get(EnvVar::Transport);
    if (t != "auto" && t != "tcp" && t != "shm" && t != "ofi") {
      cfg.record(detail::env_describe(EnvVar::Transport) +
                 " is not auto, tcp, shm or ofi");
    } else {
      cfg.set_transport(t);
    }
  }
  if (get(EnvVar::OfiProvider)) {
    cfg.set_ofi_provider(get(EnvVar::OfiProvider));
  }
  if (get(EnvVar::OfiForceRegister)) {
    const std::string v = get(EnvVar::OfiForceRegister);
    if (v != "0" && v != "1") {
      cfg.record(detail::env_describe(EnvVar::OfiForceRegister) +
                 " is not 0 or 1");
    } else {
      cfg.set_ofi_force_register(v == "1");
    }
  }
  return cfg;
}

}  // namespace jaccl
