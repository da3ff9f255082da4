// Copyright 2026 the jaccl authors.
#include "run/options.h"

#include <CLI/CLI.hpp>
#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>

#include "run/util.h"

namespace jaccl::run {

namespace {

// A CLI11 check that a number is >= min.
std::function<std::string(const std::string&)> at_least(double min) {
  return [min](const std::string& text) {
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    return text.empty() || *end != '\0' || !(v >= min)
               ? "must be a number >= " + std::to_string(static_cast<int>(min))
               : std::string();
  };
}

std::string check_kv(const std::string& kv) {
  size_t eq = kv.find('=');
  if (eq == std::string::npos || eq == 0) {
    return "expected K=V, got '" + kv + "'";
  }
  for (size_t i = 0; i < eq; ++i) {
    unsigned char c = static_cast<unsigned char>(kv[i]);
    if (!(std::isalnum(c) || c == '_') || (i == 0 && std::isdigit(c))) {
      return "'" + kv.substr(0, eq) + "' is not a variable name";
    }
  }
  return "";
}

}  // namespace

std::optional<int> parse(int argc, char** argv, Options& opt) {
  CLI::App app{
      "Starts the ranks of a program, each with JACCL_RANK, JACCL_SIZE,\n"
      "JACCL_COORDINATOR and a shared fresh JACCL_TOKEN, prefixes their "
      "output\n"
      "with [rank], and stops them all when one fails (with --elastic: lets\n"
      "the others carry on). Without --hosts or --hostfile the ranks run\n"
      "here; with them, through ssh on those hosts.",
      "jaccl-run"};
  app.footer(
      "Usage: jaccl-run -n N [options] -- program args...\n"
      "       jaccl-run --hostfile FILE [-n N] [options] -- program args...\n"
      "Exit status: 0 if every rank exits 0; else that of the first rank to\n"
      "fail (128+signal if killed); 124 on --timeout; 255 if a host cannot\n"
      "be reached; 2 on bad usage. With --elastic the same, once every rank\n"
      "has exited, after a line naming the ranks that finished and how each\n"
      "of the others ended.");
  app.prefix_command();  // the first positional starts the program
  auto* np = app.add_option("-n,--np", opt.n,
                            "number of ranks (with hosts: default every slot)")
                 ->type_name("N")
                 ->check(at_least(1));
  app.add_option("--env", opt.env, "K=V passed to every rank (repeatable)")
      ->type_name("K=V")
      ->check(check_kv);
  auto* side =
      app.add_option(
             "--side-channel", opt.side_channel,
             "set JACCL_SIDE_CHANNEL=URI for every rank (no JACCL_COORDINATOR)")
          ->type_name("URI");
  app.add_option("--coordinator", opt.coordinator,
                 "HOST:PORT for JACCL_COORDINATOR (default: a free port on "
                 "127.0.0.1, or on the first host)")
      ->type_name("HOST:PORT")
      ->excludes(side);
  app.add_flag("--no-token", opt.no_token, "do not set a fresh JACCL_TOKEN");
  app.add_flag("--no-prefix", opt.no_prefix,
               "do not prefix output lines with [rank]");
  app.add_option("--grace", opt.grace,
                 "seconds between SIGTERM and SIGKILL when stopping ranks")
      ->type_name("SECONDS")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--timeout", opt.timeout,
                 "stop the job and exit 124 after SECONDS (0: no limit)")
      ->type_name("SECONDS")
      ->check(at_least(0))
      ->capture_default_str();
  app.add_option("--bind-to", opt.bind_to,
                 "cpus: bind each rank started here to an equal, disjoint "
                 "share of our CPUs; auto: do so when every rank gets at "
                 "least one (as mpirun binds); none: leave ranks unbound")
      ->check(CLI::IsMember({"auto", "cpus", "none"}))
      ->capture_default_str();
  app.add_flag("-v,--verbose", opt.verbose, "report rank pids and exits");
  // Elastic jobs: what a rank's death does to the others.
  auto* elastic = app.add_option_group(
      "Elastic jobs", "when a rank dies (default: the others are stopped)");
  auto* elastic_flag = elastic->add_flag(
      "--elastic", opt.elastic.enabled,
      "a rank that fails or dies does not stop the others (they can shrink "
      "their group and carry on); the job ends when every rank has exited, "
      "with a line naming which finished and how each other ended. When "
      "every rank runs on this host, each gets JACCL_GROW_CHANNEL, a store "
      "jaccl-run hosts where the survivors' grows meet (across hosts, set "
      "your own: file:// or redis://)");
  elastic
      ->add_option(
          "--restart", opt.elastic.restart,
          "start a replacement for a rank started here that dies, up to N "
          "in all: the rank's command, with JACCL_JOIN=<k> for the k-th "
          "replacement and no JACCL_RANK/JACCL_SIZE, so init() joins the "
          "survivors' next grow (docs/launching.md)")
      ->type_name("N")
      ->check(at_least(0))
      ->needs(elastic_flag);
  app.add_flag("--dry-run", opt.dry_run,
               "print the command each rank would run, and run nothing");
  auto* hosts = app.add_option("--hosts", opt.hosts,
                               "run on these hosts over ssh: h1,h2:SLOTS,...")
                    ->type_name("LIST");
  app.add_option("--hostfile", opt.hostfile,
                 "run on the hosts of FILE over ssh: mlx.launch JSON, or "
                 "'host slots=N' lines")
      ->type_name("FILE")
      ->excludes(hosts);
  app.add_option("--ssh", opt.ssh, "how to reach a host")
      ->type_name("CMD")
      ->capture_default_str();
  app.add_option("--cwd", opt.cwd,
                 "working directory on the hosts (default: ours)")
      ->type_name("DIR");
  app.add_option("--connect-timeout", opt.connect_timeout,
                 "seconds a host may take to start a rank")
      ->type_name("SECONDS")
      ->check(at_least(0))
      ->capture_default_str();

  // Everything after the first "--" is the program and its arguments.
  int ours = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      ours = i;
      opt.command.assign(argv + i + 1, argv + argc);
      break;
    }
  }
  try {
    app.parse(ours, argv);
  } catch (const CLI::ParseError& e) {
    if (app.exit(e) == 0) {  // --help
      return 0;
    }
    std::fprintf(stderr,
                 "Usage: jaccl-run -n N [options] -- program args...\n");
    return kUsageExit;
  }
  if (ours == argc) {
    opt.command = app.remaining();
  } else if (!app.remaining().empty()) {
    std::fprintf(stderr, "jaccl-run: unexpected argument '%s' before '--'\n",
                 app.remaining()[0].c_str());
    return kUsageExit;
  }
  if (np->count() == 0 && !opt.multi_host()) {
    std::fprintf(stderr,
                 "jaccl-run: -n N is required (or --hosts / --hostfile)\n");
    return kUsageExit;
  }
  if (opt.command.empty()) {
    std::fprintf(stderr, "jaccl-run: no program given\n%s", app.help().c_str());
    return kUsageExit;
  }
  return std::nullopt;
}

}  // namespace jaccl::run
