// Copyright 2026 the jaccl authors.
// jaccl-run --elastic's environments: the grow channel every rank gets (the
// kv:// store jaccl-run hosts, so the rendezvous of a grow survives any
// rank), and a replacement's (--restart): the slot's environment without a
// rank or size, joining the next grow.
#pragma once

#include <string>
#include <vector>

namespace jaccl::run {

// The value of NAME in env (K=V strings), "" when absent.
std::string env_value(const std::vector<std::string>& env,
                      const std::string& name);

// env with JACCL_GROW_CHANNEL=uri added, unless it has one already (the
// user's own, from our environment or --env, wins).
void add_grow_channel(std::vector<std::string>& env, const std::string& uri);

// A replacement's environment: env without JACCL_RANK, JACCL_SIZE and their
// MLX_* spellings (the grow gives it the next rank), with
// JACCL_JOIN=generation.
std::vector<std::string> replacement_env(const std::vector<std::string>& env,
                                         int generation);

}  // namespace jaccl::run
