// Copyright 2026 the jaccl authors.
#include "run/remote.h"

#include <cmath>
#include <stdexcept>

#include "transport/ofi/shm_regions.h"

namespace jaccl::run {

std::string shell_quote(const std::string& s) {
  if (!s.empty() &&
      s.find_first_not_of("abcdefghijklmnopqrstuvwxyz"
                          "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
                          "0123456789_-+=/.,:@%") == std::string::npos) {
    return s;
  }
  std::string out = "'";
  for (char c : s) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

std::string shell_join(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    out += (out.empty() ? "" : " ") + shell_quote(a);
  }
  return out;
}

std::vector<std::string> shell_split(const std::string& cmd) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  for (size_t i = 0; i < cmd.size(); ++i) {
    char c = cmd[i];
    if (c == ' ' || c == '\t' || c == '\n') {
      if (have) {
        out.push_back(cur);
      }
      cur.clear();
      have = false;
    } else if (c == '\'') {
      size_t end = cmd.find('\'', i + 1);
      if (end == std::string::npos) {
        throw std::invalid_argument("unterminated ' in '" + cmd + "'");
      }
      cur += cmd.substr(i + 1, end - i - 1);
      have = true;
      i = end;
    } else if (c == '"') {
      size_t j = i + 1;
      for (; j < cmd.size() && cmd[j] != '"'; ++j) {
        if (cmd[j] == '\\' && j + 1 < cmd.size()) {
          ++j;
        }
        cur += cmd[j];
      }
      if (j >= cmd.size()) {
        throw std::invalid_argument("unterminated \" in '" + cmd + "'");
      }
      have = true;
      i = j;
    } else if (c == '\\' && i + 1 < cmd.size()) {
      cur += cmd[++i];
      have = true;
    } else {
      cur += c;
      have = true;
    }
  }
  if (have) {
    out.push_back(cur);
  }
  return out;
}

std::string remote_command(const RemoteRank& r) {
  // Polls of 0.1 s while the program's group answers the SIGTERM.
  const long polls = std::lround(r.grace * 10);
  std::string s;
  s += "IFS= read -r t || { echo 'jaccl-run: no job token on stdin (does "
       "the --ssh command pass its stdin on?)' >&2; exit 255; }; ";
  s += "if [ -n \"$t\" ]; then JACCL_TOKEN=$t; export JACCL_TOKEN; fi; unset "
       "t; ";
  s += "cd " + shell_quote(r.cwd) + " || { echo \"jaccl-run: no directory " +
       shell_quote(r.cwd) + " on $(uname -n) (use --cwd)\" >&2; exit 1; }; ";
  for (const auto& kv : r.env) {
    size_t eq = kv.find('=');
    s += "export " + kv.substr(0, eq) + "=" + shell_quote(kv.substr(eq + 1)) +
         "; ";
  }
  s += "f=; ";
  if (!r.devices.empty()) {
    s += "f=$(mktemp) && printf '%s\\n' " + shell_quote(r.devices) +
         " >\"$f\" || exit 1; export JACCL_IBV_DEVICES=\"$f\"; ";
  }
  s += "echo " + std::string(kStartMarker) + "$$; ";
  s += "exec 3<&0 </dev/null; ";
  // An asynchronous list ignores SIGINT and SIGQUIT; the rank must not.
  s += "d=; env --default-signal=INT true 2>/dev/null && "
       "d='env --default-signal=INT,QUIT'; ";
  s += "$d setsid \"$@\" 3<&- & p=$!; ";
  s += "{ while IFS= read -r c; do case $c in INT|TERM|HUP|KILL) "
       "kill -s \"$c\" -- \"-$p\";; esac; done; "
       "kill -s TERM -- \"-$p\"; i=0; "
       "while [ $i -lt " +
       std::to_string(polls) +
       " ] && kill -0 -- \"-$p\"; do sleep 0.1; i=$((i+1)); done; "
       "kill -s KILL -- \"-$p\"; } <&3 >/dev/null 2>&1 & w=$!; ";
  s += "exec 3<&-; ";
  s += "wait \"$p\" 2>/dev/null; s=$?; ";
  s += "kill \"$w\" 2>/dev/null; kill -s KILL -- \"-$p\" 2>/dev/null; ";
  // A rank killed by a signal leaves its libfabric shm regions (see
  // transport/ofi/shm_regions.h); its pid is $p (setsid and env exec it).
  s += "[ \"$s\" -le 128 ] || rm -f /dev/shm/\"$p\"" +
       std::string(jaccl::detail::ofi::kShmRegionTag) + "* 2>/dev/null; ";
  s += "[ -z \"$f\" ] || rm -f \"$f\"; ";
  s += "exit $s";
  std::vector<std::string> argv = {"exec", "/bin/sh", "-c", s, "jaccl-rank"};
  argv.insert(argv.end(), r.command.begin(), r.command.end());
  return shell_join(argv);
}

std::vector<std::string> ssh_argv(const std::vector<std::string>& ssh,
                                  const std::string& host,
                                  const RemoteRank& r) {
  std::vector<std::string> argv = ssh;
  argv.push_back(host);
  argv.push_back(remote_command(r));
  return argv;
}

}  // namespace jaccl::run
