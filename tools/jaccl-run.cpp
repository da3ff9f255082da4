// Copyright 2026 the jaccl authors.
// jaccl-run: starts the ranks of a program and supervises them.
//
//   jaccl-run -n N [options] -- program args...
//   jaccl-run --hosts h1,h2:2 | --hostfile FILE [-n N] [options] -- program...
//
// Every local rank gets our environment plus the --env values, then
// JACCL_RANK, JACCL_SIZE, JACCL_COORDINATOR (a free loopback port; with
// --side-channel, JACCL_SIDE_CHANNEL and no coordinator at all) and one
// fresh JACCL_TOKEN for the whole run; those we set win over --env. Only
// rank 0 reads our stdin. With hosts, each rank starts through ssh on its
// host (ranks fill the hosts in order) with the hostfile's envs, --env and
// the same JACCL_* (the coordinator on the first host), the token passed
// on ssh's stdin. Output lines are prefixed with "[rank] ". When a rank
// fails, the others get SIGTERM, then SIGKILL after the grace period, and
// jaccl-run exits with the failing rank's status (128+signal if it was
// killed). With --elastic they carry on instead: the job ends when every
// rank has exited, with the first failure's status and a closing line
// naming which ranks finished and how the others ended. SIGINT/SIGTERM/SIGHUP
// are forwarded to the ranks, on every host (a second one kills them at once),
// and jaccl-run then dies of the same signal. Local ranks have
// PR_SET_PDEATHSIG(SIGKILL); remote ones die with their ssh connection.
//
// The pieces live in tools/run/: options, hosts (--hosts and hostfiles),
// plan (what each rank runs), binding (--bind-to), remote (the ssh side),
// spawn, limits (open files, processes), output, summary (--elastic's
// closing line), launcher (the supervision loop).
#include <cstdio>

#include "run/hosts.h"
#include "run/launcher.h"
#include "run/options.h"
#include "run/output.h"
#include "run/plan.h"
#include "run/util.h"

int main(int argc, char** argv) {
  using namespace jaccl::run;
  Options opt;
  if (auto code = parse(argc, argv, opt)) {
    return *code;
  }
  JobPlan plan;
  int code = 1;
  try {
    plan = plan_job(opt, code);
  } catch (const std::exception& e) {
    note(e.what());
    err_sink().flush_all();
    return code;
  }
  if (opt.dry_run) {
    for (size_t r = 0; r < plan.ranks.size(); ++r) {
      const RankPlan& rp = plan.ranks[r];
      out_sink().put("rank " + std::to_string(r) +
                     (rp.remote ? " on " + rp.host : "") + ": " + rp.display +
                     "\n");
    }
    if (!plan.ranks.empty() && plan.ranks[0].remote) {
      out_sink().put(
          "(each ssh reads the job token, then signal names, on its stdin)\n");
    }
    out_sink().flush_all();
    return 0;
  }
  opt.n = static_cast<int>(plan.ranks.size());
  return Launcher(opt, std::move(plan)).run();
}
