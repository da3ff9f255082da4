// Copyright 2026 the jaccl authors.
#include "run/summary.h"

#include <signal.h>
#include <sys/wait.h>

#include <map>

#include "run/util.h"

namespace jaccl::run {

std::string ranks_text(const std::vector<int>& ranks) {
  std::string out = ranks.size() == 1 ? "rank " : "ranks ";
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) {
      ++j;
    }
    out += (i == 0 ? "" : ", ") + std::to_string(ranks[i]);
    if (j > i) {
      out += (j == i + 1 ? ", " : "-") + std::to_string(ranks[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string rank_outcome(const Rank& r) {
  if (r.remote && !r.started) {
    return "could not start on host " + r.host;
  }
  std::string how = describe_status(r.status);
  if (r.remote && WIFEXITED(r.status)) {
    const int code = WEXITSTATUS(r.status);
    if (code > 128 && code < 128 + NSIG) {
      const int sig = code - 128;
      how = "was killed by signal " + std::to_string(sig) + " (" +
            signal_name(sig) + ")";
    }
  } else if (r.remote) {
    how = "lost its ssh connection (ssh " + how + ")";
  }
  return r.remote ? how + " on " + r.host : how;
}

std::string elastic_summary(const std::vector<Rank>& ranks) {
  std::vector<int> finished;
  // Outcome -> ranks, in the order outcomes first appear.
  std::vector<std::string> order;
  std::map<std::string, std::vector<int>> ended;
  for (size_t i = 0; i < ranks.size(); ++i) {
    const Rank& r = ranks[i];
    if (!failed(r.status) && (!r.remote || r.started)) {
      finished.push_back(static_cast<int>(i));
      continue;
    }
    const std::string how = rank_outcome(r);
    if (ended.find(how) == ended.end()) {
      order.push_back(how);
    }
    ended[how].push_back(static_cast<int>(i));
  }
  std::string out = finished.empty()
                        ? std::string("no rank finished")
                        : ranks_text(finished) + " finished (exit 0)";
  for (const std::string& how : order) {
    const std::vector<int>& rs = ended[how];
    std::string verb = how;
    if (rs.size() > 1 && verb.rfind("was ", 0) == 0) {
      verb = "were " + verb.substr(4);
    }
    out += "; " + ranks_text(rs) + " " + verb;
  }
  return out;
}

}  // namespace jaccl::run
