// Copyright 2026 the jaccl authors.
#include "common/env.h"

#include <array>
#include <cstdlib>

namespace jaccl::detail {

namespace {

constexpr std::array<EnvVarInfo, static_cast<size_t>(EnvVar::Count_)> kTable{{
    {EnvVar::Rank, "JACCL_RANK", "MLX_RANK", "(required)",
     "rank of this process, 0 <= rank < size"},
    {EnvVar::Size, "JACCL_SIZE", "MLX_WORLD_SIZE", "(from device file)",
     "number of ranks when there is no device file"},
    {EnvVar::Coordinator, "JACCL_COORDINATOR", "MLX_JACCL_COORDINATOR", "",
     "host:port rank 0 listens on for the TCP star side channel"},
    {EnvVar::CoordinatorFd, "JACCL_COORDINATOR_FD", nullptr, "unset",
     "rank 0: an inherited socket listening on JACCL_COORDINATOR's port, "
     "served instead of binding it (set by jaccl-run)"},
    {EnvVar::IbvDevices, "JACCL_IBV_DEVICES", "MLX_IBV_DEVICES", "",
     "path of the JSON device matrix (size x size)"},
    {EnvVar::Ring, "JACCL_RING", "MLX_JACCL_RING", "unset",
     "if set (and not 0/false), prefer the ring algorithms"},
    {EnvVar::Timeout, "JACCL_TIMEOUT", nullptr, "60",
     "seconds allowed for bootstrap and connection set-up"},
    {EnvVar::OpTimeout, "JACCL_OP_TIMEOUT", nullptr, "600",
     "seconds one collective may block; 0 = no limit"},
    {EnvVar::Token, "JACCL_TOKEN", nullptr, "unset",
     "shared job secret; every connection proves it (HMAC challenge)"},
    {EnvVar::Log, "JACCL_LOG", nullptr, "warn",
     "log level: off, error, warn, info, debug, trace"},
    {EnvVar::Ifname, "JACCL_IFNAME", nullptr, "auto",
     "interface name or IP address the data plane listens on"},
    {EnvVar::Listen, "JACCL_LISTEN", nullptr, "1",
     "0: this rank opens no listening socket and only dials out"},
    {EnvVar::Wires, "JACCL_WIRES", nullptr, "(per data plane)",
     "data connections (ofi: endpoints) per neighbour; tcp 2 or 1, ofi 1"},
    {EnvVar::Transport, "JACCL_TRANSPORT", nullptr, "auto",
     "data plane: auto, tcp, shm or ofi"},
    {EnvVar::SideChannel, "JACCL_SIDE_CHANNEL", nullptr, "unset",
     "side channel URI: tcp://, file://, redis://, mpi://, pmix://"},
    {EnvVar::Job, "JACCL_JOB", nullptr, "(from token)",
     "job id that namespaces file and Redis side channels"},
    {EnvVar::HeartbeatTimeout, "JACCL_HEARTBEAT_TIMEOUT", nullptr, "10",
     "seconds of silence after which a peer is declared lost; 0 = off"},
    {EnvVar::Join, "JACCL_JOIN", nullptr, "unset",
     "start as a newcomer joining the grow to this generation (>= 1)"},
    {EnvVar::GrowChannel, "JACCL_GROW_CHANNEL", nullptr, "unset",
     "where grows meet: kv://, file://, redis://"},
    {EnvVar::ShmBudget, "JACCL_SHM_BUDGET", nullptr, "64",
     "MiB of shared memory the ranks of one host may use"},
    {EnvVar::ShmStrategy, "JACCL_SHM_STRATEGY", nullptr, "auto",
     "large shm ops' stores: auto, cached, stream-stage, stream or direct"},
    {EnvVar::OfiProvider, "JACCL_OFI_PROVIDER", nullptr, "(best found)",
     "libfabric provider of the ofi transport, e.g. tcp;ofi_rxm, shm, "
     "verbs;ofi_rxm, efa"},
    {EnvVar::OfiForceRegister, "JACCL_OFI_FORCE_REGISTER", nullptr, "0",
     "test knob: 1 registers every ofi buffer even when the provider does not "
     "require it"},
    {EnvVar::TorchInlineBytes, "JACCL_TORCH_INLINE_BYTES", nullptr, "65536",
     "PyTorch backend: ops of at most this many bytes, issued while their "
     "group is idle, run on the calling thread (read at import)"},
    // Launchers' variables, read only when JACCL_RANK / JACCL_SIZE (and
    // their MLX_* spellings) are unset, in this order.
    {EnvVar::OmpiRank, "OMPI_COMM_WORLD_RANK", nullptr, "unset",
     "rank under Open MPI's mpirun"},
    {EnvVar::OmpiSize, "OMPI_COMM_WORLD_SIZE", nullptr, "unset",
     "size under Open MPI's mpirun"},
    {EnvVar::PmiRank, "PMI_RANK", nullptr, "unset",
     "rank under a PMI launcher"},
    {EnvVar::PmiSize, "PMI_SIZE", nullptr, "unset",
     "size under a PMI launcher"},
    {EnvVar::SlurmRank, "SLURM_PROCID", nullptr, "unset", "rank under srun"},
    {EnvVar::SlurmSize, "SLURM_NTASKS", nullptr, "unset", "size under srun"},
    {EnvVar::PmixNamespace, "PMIX_NAMESPACE", nullptr, "unset",
     "set by a PMIx launcher (srun --mpi=pmix, mpirun): with no coordinator "
     "or side channel named, pmix:// is used"},
}};

constexpr bool table_in_order() {
  for (size_t i = 0; i < kTable.size(); ++i) {
    if (static_cast<size_t>(kTable[i].id) != i) {
      return false;
    }
  }
  return true;
}
static_assert(table_in_order(), "env table must follow the EnvVar order");

const char* nonempty(const char* s) {
  return (s != nullptr && *s != '\0') ? s : nullptr;
}

}  // namespace

std::span<const EnvVarInfo> env_table() {
  return kTable;
}

const EnvVarInfo& env_info(EnvVar v) {
  return kTable[static_cast<size_t>(v)];
}

const char* env_source_name(EnvVar v) {
  const auto& info = env_info(v);
  if (nonempty(std::getenv(info.name))) {
    return info.name;
  }
  if (info.alias != nullptr && nonempty(std::getenv(info.alias))) {
    return info.alias;
  }
  return nullptr;
}

const char* env_get(EnvVar v) {
  const char* name = env_source_name(v);
  return name == nullptr ? nullptr : std::getenv(name);
}

std::string env_describe(EnvVar v) {
  const char* name = env_source_name(v);
  const char* value = env_get(v);
  return std::string(name ? name : env_info(v).name) + "='" +
         (value ? value : "") + "'";
}

}  // namespace jaccl::detail
