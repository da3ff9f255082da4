// Copyright 2026 the jaccl authors.
// Which providers this machine has: fi_getinfo for reliable tagged RDM, the
// names as the card and JACCL_OFI_PROVIDER spell them, and which of them
// drives RDMA hardware (for JACCL_TRANSPORT=auto).
#include <strings.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "transport/ofi/ofi_fabric.h"
#include "transport/ofi/ofi_impl.h"

namespace jaccl::detail::ofi {

#if JACCL_HAVE_OFI

bool built() {
  return true;
}

std::string fi_text(int err) {
  const Lib* l = try_lib(nullptr);
  const int e = err < 0 ? -err : err;
  return l != nullptr ? l->strerror(e) : "libfabric error " + std::to_string(e);
}

InfoPtr make_hints(const std::string& provider, const std::string& domain) {
  InfoPtr h(lib().dupinfo(nullptr));  // fi_allocinfo()
  if (!h) {
    return h;
  }
  h->caps = FI_TAGGED | FI_DIRECTED_RECV;
  // Request::ctx holds an fi_context2, so providers that want one (efa, psm)
  // get it.
  h->mode = FI_CONTEXT | FI_CONTEXT2;
  h->ep_attr->type = FI_EP_RDM;
  h->domain_attr->mr_mode = kMrModeOffered;
  // Several endpoints of one domain are driven by different threads at once,
  // and registrations happen from all of them.
  h->domain_attr->threading = FI_THREAD_SAFE;
  h->tx_attr->msg_order = FI_ORDER_SAS;
  h->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) {
    h->fabric_attr->prov_name = strdup(provider.c_str());
  }
  if (!domain.empty()) {
    h->domain_attr->name = strdup(domain.c_str());
  }
  return h;
}

InfoPtr query(const std::string& provider, const std::string& domain, int* rc) {
  auto hints = make_hints(provider, domain);
  fi_info* list = nullptr;
  int r = hints ? lib().getinfo(kApiVersion, nullptr, nullptr, 0, hints.get(),
                                &list)
                : -FI_ENOMEM;
  if (rc != nullptr) {
    *rc = r;
  }
  if (r != 0) {
    return InfoPtr();
  }
  // fi_getinfo's name filter also lets layered variants through ("tcp"
  // matches "tcp;ofi_rxm"), and layered providers ignore the domain name
  // (tcp;ofi_rxm returns every interface): keep exact matches only.
  fi_info* head = nullptr;
  fi_info** tail = &head;
  for (fi_info* i = list; i != nullptr;) {
    fi_info* next = i->next;
    i->next = nullptr;
    bool keep =
        (provider.empty() ||
         strcasecmp(i->fabric_attr->prov_name, provider.c_str()) == 0) &&
        (domain.empty() ||
         (i->domain_attr->name != nullptr && domain == i->domain_attr->name));
    if (keep) {
      *tail = i;
      tail = &i->next;
    } else {
      lib().freeinfo(i);
    }
    i = next;
  }
  return InfoPtr(head);
}

std::string describe(const fi_info* list) {
  // "tcp;ofi_rxm (domains eth0, lo), shm (domain shm)": each provider once,
  // its domains in fi_getinfo's order (entries repeat per fabric/address
  // family).
  std::vector<std::pair<std::string, std::vector<std::string>>> provs;
  for (const fi_info* i = list; i != nullptr; i = i->next) {
    std::string p = i->fabric_attr->prov_name;
    std::string d = i->domain_attr->name ? i->domain_attr->name : "?";
    auto it = std::find_if(provs.begin(), provs.end(),
                           [&](const auto& e) { return e.first == p; });
    if (it == provs.end()) {
      provs.push_back({p, {}});
      it = provs.end() - 1;
    }
    if (std::find(it->second.begin(), it->second.end(), d) ==
        it->second.end()) {
      it->second.push_back(d);
    }
  }
  std::string out;
  for (const auto& [p, ds] : provs) {
    out += (out.empty() ? "" : ", ") + p +
           (ds.size() == 1 ? " (domain " : " (domains ");
    for (size_t k = 0; k < ds.size(); ++k) {
      out += (k ? ", " : "") + ds[k];
    }
    out += ")";
  }
  return out.empty() ? "none" : out;
}

std::vector<std::string> available_providers() {
  if (try_lib(nullptr) == nullptr) {
    return {};  // no libfabric at run time: no providers
  }
  auto list = query("", "", nullptr);
  std::vector<std::string> names;
  for (fi_info* i = list.get(); i != nullptr; i = i->next) {
    std::string name = i->fabric_attr->prov_name;
    bool seen = false;
    for (auto& n : names) {
      seen = seen || n == name;
    }
    if (!seen) {
      names.push_back(name);
    }
  }
  return names;
}

std::string hardware_provider() {
  static const char* const kHardware[] = {"verbs", "efa", "psm2",
                                          "psm3",  "cxi", "opx"};
  if (try_lib(nullptr) == nullptr) {
    return "";
  }
  auto list = query("", "", nullptr);
  for (fi_info* i = list.get(); i != nullptr; i = i->next) {
    std::string name = i->fabric_attr->prov_name;
    std::string core = name.substr(0, name.find(';'));
    bool hw = false;
    for (const char* h : kHardware) {
      hw = hw || strcasecmp(core.c_str(), h) == 0;
    }
    if (!hw) {
      continue;
    }
    // Usable: the fabric and domain open (fi_getinfo alone can list a
    // provider whose device is down).
    fid_fabric* fabric = nullptr;
    fid_domain* domain = nullptr;
    bool ok = lib().fabric(i->fabric_attr, &fabric, nullptr) == 0 &&
              fi_domain(fabric, i, &domain, nullptr) == 0;
    if (domain != nullptr) {
      fi_close(&domain->fid);
    }
    if (fabric != nullptr) {
      fi_close(&fabric->fid);
    }
    if (ok) {
      return name;
    }
  }
  return "";
}

std::string provider_with_domain(const std::string& domain,
                                 std::string* listing) {
  if (try_lib(nullptr) == nullptr) {
    if (listing != nullptr) {
      *listing = "none (libfabric cannot be loaded)";
    }
    return "";
  }
  auto list = query("", "", nullptr);
  if (listing != nullptr) {
    *listing = describe(list.get());
  }
  // A hardware provider's domain before a software one of the same name.
  const std::string hw = hardware_provider();
  std::string found;
  for (fi_info* i = list.get(); i != nullptr; i = i->next) {
    if (i->domain_attr->name == nullptr || domain != i->domain_attr->name) {
      continue;
    }
    const std::string name = i->fabric_attr->prov_name;
    if (name == hw) {
      return name;
    }
    if (found.empty()) {
      found = name;
    }
  }
  return found;
}

#else  // !JACCL_HAVE_OFI

bool built() {
  return false;
}
std::vector<std::string> available_providers() {
  return {};
}
std::string hardware_provider() {
  return "";
}
std::string provider_with_domain(const std::string&, std::string* listing) {
  if (listing != nullptr) {
    *listing = "none (this jaccl was built without libfabric)";
  }
  return "";
}

#endif

}  // namespace jaccl::detail::ofi
