// Copyright 2026 the jaccl authors.
// pmix:// side channel: the resource manager's own bootstrap service (PMIx),
// as run by Slurm's `srun --mpi=pmix`, Open MPI's `mpirun` and PRRTE. No port
// is opened and MPI is never called.
//
// PMIx is initialized (PMIx_Init) on first use and finalized at exit; PMIx
// counts initializations, so an application (or an MPI library) that uses
// PMIx itself keeps working. Rank and size are the PMIx rank and the job's
// PMIX_JOB_SIZE.
//
// Each all-gather is one PMIx_Put of the caller's bytes under a key unique to
// the channel and the call ("jaccl.<channel>.<call>"), PMIx_Commit, a
// PMIx_Fence over the whole namespace that collects the data, and one
// PMIx_Get per rank. The fence and the gets are non-blocking calls waited
// for with the channel's deadline (and PMIX_TIMEOUT is passed to the
// server): a rank that never joins a fence makes the others raise a
// TimeoutError naming pmix:// and the namespace; after a timeout the channel
// is broken and every later call fails at once. PMIx failures are IoErrors
// naming the call and PMIx's status string (PMIx_Error_string).
//
// Built only when PMIx was found at configure time (JACCL_HAVE_PMIX);
// otherwise every entry point raises a ConfigError saying how to enable it.
#pragma once

#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

// Whether this build has the PMIx channel.
bool pmix_channel_built();

// Whether this process was started by a PMIx launcher (PMIX_NAMESPACE is
// set), whatever the build.
bool pmix_launcher_present();

// This process's PMIx rank and the job's size, initializing PMIx if needed.
// False when the build has no PMIx or no PMIx launcher started us; a PMIx
// that fails to initialize is an IoError naming its status.
bool pmix_rank_size(int* rank, int* size);

// rank / size < 0 / <= 0 mean "take PMIx's"; given values must match PMIx's
// (ConfigError otherwise). Collective: every rank of the PMIx job creates
// its channels in the same order. timeout bounds each call (<= 0: none).
AllGatherFn make_pmix_channel(int rank, int size, Millis timeout);

}  // namespace jaccl::detail
