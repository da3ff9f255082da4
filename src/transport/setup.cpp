// Copyright 2026 the jaccl authors.
#include "transport/setup.h"

#include "common/error.h"

namespace jaccl::detail {

std::shared_ptr<Group> make_group(const Config& cfg, SideChannel& sc) {
  sc.barrier();
  raise(ErrorKind::Config,
        "bootstrap over the side channel (" + sc.description() +
            ") completed, but this build has no data plane yet",
        {.rank = cfg.get_rank()});
}

}  // namespace jaccl::detail
