// Copyright 2026 the jaccl authors.
// jaccl-run's command line.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace jaccl::run {

// What to do when a rank dies. Off (the default): stop the others. On: let
// them carry on (a group that shrinks past the dead rank) and end the job
// when every rank has exited. restart: how many replacements (in all) to
// start for ranks that died, each joining the survivors' next grow.
struct ElasticOptions {
  bool enabled = false;
  int restart = 0;
};

struct Options {
  int n = 0;                     // 0 with hosts: every slot
  std::vector<std::string> env;  // K=V
  std::string side_channel;
  std::string coordinator;
  bool no_token = false;
  bool no_prefix = false;
  double grace = 3;
  double timeout = 0;
  std::string bind_to = "auto";  // auto, cpus, none (run/binding.h)
  bool verbose = false;
  bool dry_run = false;
  ElasticOptions elastic;
  // Several hosts.
  std::string hosts;     // --hosts h1,h2:2
  std::string hostfile;  // --hostfile FILE
  std::string ssh = "ssh -o BatchMode=yes";
  std::string cwd;  // "" = ours
  double connect_timeout = 30;
  std::vector<std::string> command;

  bool multi_host() const { return !hosts.empty() || !hostfile.empty(); }
};

// Fills opt; returns the exit code on a usage error or --help.
std::optional<int> parse(int argc, char** argv, Options& opt);

}  // namespace jaccl::run
