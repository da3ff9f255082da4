// Copyright 2026 the jaccl authors.
// Internal: the RDM endpoint behind ofi::Endpoint (ofi_endpoint.cpp).
#pragma once

#if JACCL_HAVE_OFI

#include <memory>

#include "transport/ofi/ofi_impl.h"

namespace jaccl::detail::ofi {

std::unique_ptr<Endpoint> make_ofi_endpoint(std::shared_ptr<DomainState> d);

}  // namespace jaccl::detail::ofi

#endif
