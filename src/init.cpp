// Copyright 2026 the jaccl authors.
// jaccl::init: validate the config, build the side channel (factory, then
// function, then URI, then the TCP coordinator), then the group.
#include <memory>

#include "bootstrap/side_channel.h"
#include "bootstrap/tcp_star.h"
#include "bootstrap/uri.h"
#include "common/error.h"
#include "common/handshake.h"
#include "common/log.h"
#include "group/group_handle.h"
#include "group/grow.h"
#include "group/make_group.h"
#include "jaccl/jaccl.h"

namespace jaccl {

namespace detail {

uint64_t config_fingerprint(const Config& cfg) {
  std::string devices = "size=" + std::to_string(cfg.get_size());
  for (const auto& row : cfg.get_devices()) {
    for (const auto& cell : row) {
      devices += "|";
      for (const auto& name : cell)
        devices += name + ",";
    }
  }
  ConfigFingerprint fp;
  fp.devices = hash16(devices);
  fp.topology = hash16(cfg.get_prefer_ring() ? "ring" : "auto");
  fp.transport =
      hash16(cfg.get_transport() + "/" + std::to_string(cfg.get_wires()));
  fp.token = hash16(std::to_string(token_fingerprint(cfg.get_token())));
  return fp.pack();
}

// Factory first, then the plain function, then a side-channel URI, then the
// coordinator: upstream's order (with our URI slotted in before its
// default), so code ported from MLX behaves the same.
SideChannel make_side_channel(const Config& cfg) {
  int rank = cfg.get_rank(), size = cfg.get_size();
  uint64_t fp = config_fingerprint(cfg);
  if (cfg.get_all_gather_factory()) {
    AllGatherFn fn;
    try {
      fn = cfg.get_all_gather_factory()(rank, size);
    } catch (...) {
      rethrow_as_error(std::current_exception(), ErrorKind::Config,
                       "the all-gather factory threw", {.rank = rank});
    }
    if (!fn) {
      raise(ErrorKind::Config,
            "the all-gather factory returned an empty function",
            {.rank = rank});
    }
    return SideChannel(rank, size, fp, std::move(fn), "user factory",
                       cfg.get_timeout(), true);
  }
  if (cfg.get_all_gather()) {
    return SideChannel(rank, size, fp, cfg.get_all_gather(),
                       "user all-gather function", cfg.get_timeout(), true);
  }
  // A built-in channel: its gather, and its view where it has one.
  auto built_in = [&](GatherFns ch, std::string name) {
    return SideChannel(rank, size, fp, std::move(ch.fn), std::move(name),
                       cfg.get_timeout(), false, std::move(ch.view));
  };
  if (!cfg.get_side_channel().empty()) {
    SideChannelSpec spec{
        cfg.get_side_channel(), rank, size, cfg.get_job(), cfg.get_token(),
        cfg.get_timeout()};
    return built_in(make_side_channel_fns_from_uri(spec),
                    redact_uri(cfg.get_side_channel()));
  }
  TcpStarOptions opt{rank, size, cfg.get_coordinator(), cfg.get_token(),
                     cfg.get_timeout()};
  return built_in(make_tcp_star_fns(opt),
                  "TCP coordinator " + cfg.get_coordinator());
}

}  // namespace detail

bool is_available() {
  return true;
}

std::shared_ptr<Group> init(const Config& cfg, bool strict) {
  std::string why = cfg.invalid_reason();
  if (!why.empty()) {
    if (strict) {
      detail::raise(ErrorKind::Config, "invalid configuration: " + why);
    }
    JACCL_LOG(Info, "init: not starting, invalid configuration: " << why);
    return nullptr;
  }
  if (cfg.get_join() >= 1) {
    return detail::join_group(cfg);  // a newcomer to a grow
  }
  auto sc = detail::make_side_channel(cfg);
  detail::GroupControl control;
  auto inner = detail::make_group(cfg, sc, &control);
  return std::make_shared<detail::GroupHandle>(
      std::move(inner), cfg, std::vector<int>{}, std::move(control));
}

std::shared_ptr<Group> init(bool strict) {
  return init(Config::from_env(), strict);
}

std::shared_ptr<Group> init(bool strict, AllGatherFactory factory) {
  return init(Config::from_env().set_all_gather_factory(std::move(factory)),
              strict);
}

}  // namespace jaccl
