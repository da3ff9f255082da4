// Copyright 2026 the jaccl authors.
// Opening a provider: fi_getinfo with jaccl's hints, the fabric and domain,
// what mr_mode demands, and the clear error when the provider or domain asked
// for does not exist or cannot be used.
#include <string>

#include "common/error.h"
#include "common/log.h"
#include "transport/ofi/ofi_endpoint.h"
#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/ofi_impl.h"

namespace jaccl::detail::ofi {

#if JACCL_HAVE_OFI

DomainState::~DomainState() {
  if (domain != nullptr) {
    fi_close(&domain->fid);
  }
  if (fabric != nullptr) {
    fi_close(&fabric->fid);
  }
}

namespace {

class DomainImpl final : public Domain {
 public:
  explicit DomainImpl(std::shared_ptr<DomainState> s) : s_(std::move(s)) {}
  std::string provider() const override {
    return s_->info->fabric_attr->prov_name;
  }
  std::string fabric() const override { return s_->info->fabric_attr->name; }
  std::string domain() const override { return s_->info->domain_attr->name; }
  bool registers() const override { return s_->registers; }
  std::unique_ptr<Endpoint> make_endpoint() override {
    return make_ofi_endpoint(s_);
  }

 private:
  std::shared_ptr<DomainState> s_;
};

std::string wanted(const Options& o) {
  std::string w = "ofi provider '" + o.provider + "'";
  if (o.provider.empty()) {
    w = "any ofi provider";
  }
  if (!o.domain.empty()) {
    w += " with domain '" + o.domain + "'";
  }
  return w;
}

[[noreturn]] void not_found(const Options& o, int rc) {
  auto all = query("", "", nullptr);
  std::string what;
  if (!o.domain.empty() && query(o.provider, "", nullptr)) {
    auto same = query(o.provider, "", nullptr);
    what = "ofi domain '" + o.domain + "' matches no domain of provider '" +
           (o.provider.empty() ? std::string("(any)") : o.provider) +
           "'; its domains: " + describe(same.get());
  } else {
    what = wanted(o) +
           " is not available for reliable tagged messages (FI_EP_RDM) on "
           "this machine";
    if (rc != 0 && rc != -FI_ENODATA) {
      what += " (fi_getinfo: " + fi_text(rc) + ")";
    }
    what += "; fi_getinfo returned: " + describe(all.get());
  }
  raise(ErrorKind::Config, what, {.rank = o.rank});
}

[[noreturn]] void unusable(const Options& o, const fi_info* info,
                           const char* step, int rc) {
  auto all = query("", "", nullptr);
  raise(ErrorKind::Config,
        std::string("ofi provider '") + info->fabric_attr->prov_name +
            "' (fabric " + info->fabric_attr->name + ", domain " +
            info->domain_attr->name + ") cannot be used: " + step + ": " +
            fi_text(rc) + "; fi_getinfo returned: " + describe(all.get()),
        {.rank = o.rank});
}

}  // namespace

std::shared_ptr<Domain> Domain::open(const Options& opts) {
  lib(opts.rank);  // a ConfigError naming the package when it cannot load
  int rc = 0;
  auto list = query(opts.provider, opts.domain, &rc);
  if (!list) {
    not_found(opts, rc);
  }
  auto s = std::make_shared<DomainState>();
  s->opts = opts;
  s->info.reset(lib().dupinfo(list.get()));
  if (!s->info) {
    raise(ErrorKind::Io, "fi_dupinfo failed", {.rank = opts.rank});
  }
  rc = lib().fabric(s->info->fabric_attr, &s->fabric, nullptr);
  if (rc != 0) {
    unusable(opts, s->info.get(), "fi_fabric", rc);
  }
  rc = fi_domain(s->fabric, s->info.get(), &s->domain, nullptr);
  if (rc != 0) {
    unusable(opts, s->info.get(), "fi_domain", rc);
  }
  s->mr_mode = s->info->domain_attr->mr_mode;
  // FI_LOCAL_MR is the pre-1.5 spelling of FI_MR_LOCAL, still in info->mode.
  bool local =
      (s->mr_mode & FI_MR_LOCAL) != 0 || (s->info->mode & FI_LOCAL_MR) != 0;
  if (local) {
    s->mr_mode |= FI_MR_LOCAL;
  }
  s->registers = local || opts.force_register;
  JACCL_LOG(Info, "ofi: provider "
                      << s->info->fabric_attr->prov_name << ", fabric "
                      << s->info->fabric_attr->name << ", domain "
                      << s->info->domain_attr->name << ", mr_mode 0x"
                      << std::hex << s->mr_mode << std::dec
                      << (s->registers ? ", registering buffers" : ""));
  return std::make_shared<DomainImpl>(std::move(s));
}

#else  // !JACCL_HAVE_OFI

std::shared_ptr<Domain> Domain::open(const Options& opts) {
  raise(ErrorKind::Config,
        "the ofi transport is not built: install libfabric-dev (or run "
        "scripts/setup.sh) and reconfigure jaccl",
        {.rank = opts.rank});
}

#endif

}  // namespace jaccl::detail::ofi
