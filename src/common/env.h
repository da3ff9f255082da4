// Copyright 2026 the jaccl authors.
// Every environment variable jaccl reads, in one table. docs/environment.md
// is checked against this one by a test (tests/unit/test_env_table.cpp).
#pragma once

#include <span>
#include <string>

namespace jaccl::detail {

enum class EnvVar {
  Rank,
  Size,
  Coordinator,
  CoordinatorFd,
  IbvDevices,
  Ring,
  Timeout,
  OpTimeout,
  Token,
  Log,
  Ifname,
  Listen,
  Wires,
  Transport,
  SideChannel,
  Job,
  HeartbeatTimeout,
  Join,
  GrowChannel,
  ShmBudget,
  ShmStrategy,
  OfiProvider,
  OfiForceRegister,
  TorchInlineBytes,
  OmpiRank,
  OmpiSize,
  PmiRank,
  PmiSize,
  SlurmRank,
  SlurmSize,
  PmixNamespace,
  Count_,  // keep last
};

struct EnvVarInfo {
  EnvVar id;
  const char* name;     // JACCL_* spelling (wins)
  const char* alias;    // MLX_* spelling, or nullptr
  const char* def;      // default, as documented
  const char* meaning;  // one line
};

std::span<const EnvVarInfo> env_table();
const EnvVarInfo& env_info(EnvVar v);

// Value of the variable (JACCL_* first, then MLX_*), nullptr if unset. An
// empty value counts as unset.
const char* env_get(EnvVar v);

// Which spelling supplied the value (for error messages), nullptr if unset.
const char* env_source_name(EnvVar v);

// NAME='value' as the environment gave it (the spelling that supplied it),
// for the error that says the value is wrong. Only for a set variable.
std::string env_describe(EnvVar v);

}  // namespace jaccl::detail
