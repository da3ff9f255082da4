// Copyright 2026 the jaccl authors.
// Whether this machine has a device node any RDMA hardware provider could
// drive, found without loading libfabric.
//
// Under JACCL_TRANSPORT=auto a rank asks libfabric for a provider that
// drives RDMA hardware (verbs, efa, psm2, psm3, cxi, opx). Loading
// libfabric and its provider plug-ins and running fi_getinfo costs about
// 0.4 s of CPU per process on a machine without any such device, which was
// most of jaccl::init's time on one host. Every one of those providers needs
// a kernel device that shows here first:
//   - verbs, efa, psm3 and the hfi1-based psm2/opx register an RDMA device
//     under /sys/class/infiniband (rdma_rxe, soft-RoCE, does too);
//   - psm2 and opx open /dev/hfi1_N;
//   - cxi (Slingshot) has /dev/cxiN and /sys/class/cxi.
// So when none of them exists, no hardware provider can work and the probe
// is skipped.
#pragma once

#include <string>

namespace jaccl::detail {

// The first RDMA device node found under root ("/" normally; a test passes
// a directory of its own), e.g. "/sys/class/infiniband/mlx5_0"; "" if none.
std::string find_rdma_device(const std::string& root = "/");

}  // namespace jaccl::detail
