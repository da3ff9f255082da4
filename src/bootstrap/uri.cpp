// Copyright 2026 the jaccl authors.
#include "bootstrap/uri.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include "bootstrap/file_channel.h"
#include "bootstrap/mpi_channel.h"
#include "bootstrap/pmix_channel.h"
#include "bootstrap/redis_channel.h"
#include "bootstrap/tcp_star.h"
#include "common/bytes.h"
#include "common/crypto.h"
#include "common/error.h"
#include "common/log.h"

namespace jaccl::detail {

namespace {

constexpr const char* kSchemes =
    "tcp://host:port, file:///shared/dir, redis://host[:port][/prefix], "
    "mpi://, pmix://";

[[noreturn]] void bad_uri(std::string_view uri, const std::string& why,
                          int rank = -1) {
  raise(ErrorKind::Config,
        "invalid side-channel URI '" + redact_uri(uri) + "': " + why,
        {.rank = rank, .address = redact_uri(uri)});
}

// "host:port", "[v6]:port", "host" (port = default_port, -1: required).
void split_host_port(std::string_view uri, std::string_view hp,
                     int default_port, std::string* host, int* port) {
  std::string_view h = hp, p;
  if (!hp.empty() && hp.front() == '[') {
    size_t close = hp.find(']');
    if (close == std::string_view::npos) {
      bad_uri(uri, "unterminated '[' in the host");
    }
    h = hp.substr(1, close - 1);
    std::string_view rest = hp.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':')
        bad_uri(uri, "expected ':port' after ']'");
      p = rest.substr(1);
    }
  } else if (size_t colon = hp.rfind(':'); colon != std::string_view::npos) {
    h = hp.substr(0, colon);
    p = hp.substr(colon + 1);
    if (p.empty())
      bad_uri(uri, "empty port");
  }
  if (h.empty()) {
    bad_uri(uri, "no host");
  }
  *host = std::string(h);
  if (p.empty()) {
    if (default_port < 0)
      bad_uri(uri, "no port (expected host:port)");
    *port = default_port;
    return;
  }
  int v = 0;
  auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), v);
  if (ec != std::errc() || end != p.data() + p.size() || v < 1 || v > 65535) {
    bad_uri(uri, "bad port '" + std::string(p) + "' (expected 1..65535)");
  }
  *port = v;
}

std::string sha256_hex16(std::string_view s) {
  const Sha256Digest md = sha256(s);
  return to_hex(md.data(), 8);
}

}  // namespace

std::string redact_uri(std::string_view uri) {
  size_t scheme = uri.find("://");
  if (scheme == std::string_view::npos) {
    return std::string(uri);
  }
  size_t auth_start = scheme + 3;
  size_t auth_end = uri.find('/', auth_start);
  std::string_view auth = uri.substr(auth_start, auth_end - auth_start);
  size_t at = auth.rfind('@');
  if (at == std::string_view::npos) {
    return std::string(uri);
  }
  std::string_view user = auth.substr(0, at);
  size_t colon = user.find(':');
  std::string out(uri.substr(0, auth_start));
  out += std::string(user.substr(0, colon)) + ":***@";
  out += std::string(uri.substr(auth_start + at + 1));
  return out;
}

ParsedSideChannelUri parse_side_channel_uri(std::string_view uri) {
  ParsedSideChannelUri out;
  size_t sep = uri.find("://");
  if (sep == std::string_view::npos) {
    bad_uri(uri, std::string("no scheme; expected one of ") + kSchemes);
  }
  std::string scheme(uri.substr(0, sep));
  for (auto& c : scheme) {
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  std::string_view rest = uri.substr(sep + 3);
  if (scheme == "tcp") {
    out.scheme = SideChannelScheme::Tcp;
    if (rest.find('/') != std::string_view::npos) {
      bad_uri(uri, "tcp:// takes host:port only");
    }
    split_host_port(uri, rest, -1, &out.host, &out.port);
  } else if (scheme == "file") {
    out.scheme = SideChannelScheme::File;
    if (rest.empty() || rest.front() != '/') {
      bad_uri(uri,
              "file:// needs an absolute path (file:///path: three slashes; "
              "no host)");
    }
    out.path = std::string(rest);
    while (out.path.size() > 1 && out.path.back() == '/') {
      out.path.pop_back();
    }
  } else if (scheme == "redis") {
    out.scheme = SideChannelScheme::Redis;
    size_t slash = rest.find('/');
    std::string_view auth = rest.substr(0, slash);
    if (slash != std::string_view::npos) {
      out.prefix = std::string(rest.substr(slash + 1));
      while (!out.prefix.empty() && out.prefix.back() == '/') {
        out.prefix.pop_back();
      }
    }
    if (out.prefix.empty()) {
      out.prefix = "jaccl";
    }
    if (size_t at = auth.rfind('@'); at != std::string_view::npos) {
      std::string_view cred = auth.substr(0, at);
      auth = auth.substr(at + 1);
      size_t colon = cred.find(':');
      if (colon == std::string_view::npos) {
        out.password = std::string(cred);
      } else {
        out.user = std::string(cred.substr(0, colon));
        out.password = std::string(cred.substr(colon + 1));
      }
    }
    split_host_port(uri, auth, 6379, &out.host, &out.port);
  } else if (scheme == "mpi") {
    out.scheme = SideChannelScheme::Mpi;
    if (!rest.empty()) {
      bad_uri(uri, "mpi:// takes no host or path");
    }
  } else if (scheme == "pmix") {
    out.scheme = SideChannelScheme::Pmix;
    if (!rest.empty()) {
      bad_uri(uri, "pmix:// takes no host or path");
    }
  } else {
    bad_uri(uri,
            "unknown scheme '" + scheme + "'; expected one of " + kSchemes);
  }
  return out;
}

std::string job_id(std::string_view job_env, std::string_view token) {
  if (!job_env.empty()) {
    bool ok = job_env.front() != '.' && job_env.size() <= 128;
    for (char c : job_env) {
      ok = ok && (std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
                  c == '-' || c == '.');
    }
    if (!ok) {
      raise(ErrorKind::Config,
            "JACCL_JOB='" + std::string(job_env) +
                "' is not a valid job id (use 1..128 of [A-Za-z0-9_.-], not "
                "starting with '.')");
    }
    return std::string(job_env);
  }
  if (!token.empty()) {
    return "t" +
           sha256_hex16(std::string("jaccl job id\n") + std::string(token));
  }
  return "default";
}

RedisOptions redis_options(const ParsedSideChannelUri& p, std::string job,
                           int rank, Millis timeout, int size) {
  RedisOptions o;
  o.host = p.host;
  o.port = p.port;
  o.user = p.user;
  o.password = p.password;
  o.prefix = p.prefix;
  o.job = std::move(job);
  o.rank = rank;
  o.size = size;
  o.timeout = timeout;
  return o;
}

AllGatherFn make_side_channel_from_uri(const SideChannelSpec& spec) {
  return make_side_channel_fns_from_uri(spec).fn;
}

GatherFns make_side_channel_fns_from_uri(const SideChannelSpec& spec) {
  auto p = parse_side_channel_uri(spec.uri);
  const std::string shown = redact_uri(spec.uri);
  if (p.scheme != SideChannelScheme::Mpi &&
      p.scheme != SideChannelScheme::Pmix &&
      (spec.size < 1 || spec.rank < 0 || spec.rank >= spec.size)) {
    raise(ErrorKind::Config,
          "side channel " + shown + " needs a rank in 0..size-1, got rank " +
              std::to_string(spec.rank) + " of size " +
              std::to_string(spec.size),
          {.rank = spec.rank, .address = shown});
  }
  switch (p.scheme) {
    case SideChannelScheme::Tcp: {
      TcpStarOptions o;
      o.rank = spec.rank;
      o.size = spec.size;
      o.address = p.host.find(':') != std::string::npos
                      ? "[" + p.host + "]:" + std::to_string(p.port)
                      : p.host + ":" + std::to_string(p.port);
      o.token = spec.token;
      o.timeout = spec.timeout;
      return make_tcp_star_fns(o);
    }
    case SideChannelScheme::File:
    case SideChannelScheme::Redis: {
      std::string job = job_id(spec.job, spec.token);
      if (job == "default") {
        JACCL_LOG(Warn, "rank " << spec.rank << ": side channel " << shown
                                << " runs as job 'default' (no JACCL_JOB, no "
                                   "token): a second job that runs at the "
                                   "same time against it would collide; set "
                                   "JACCL_JOB to a unique id");
      }
      if (p.scheme == SideChannelScheme::File) {
        return {make_file_channel(
            {p.path, job, spec.rank, spec.size, spec.timeout})};
      }
      return {make_redis_channel(
          redis_options(p, job, spec.rank, spec.timeout, spec.size))};
    }
    case SideChannelScheme::Mpi:
      return {make_mpi_channel(spec.rank, spec.size)};
    case SideChannelScheme::Pmix:
      return {make_pmix_channel(spec.rank, spec.size, spec.timeout)};
  }
  raise(ErrorKind::Internal, "unhandled side-channel scheme");
}

}  // namespace jaccl::detail
