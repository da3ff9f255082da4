// Copyright 2026 the jaccl authors.
// mpi:// side channel: MPI_Allgather over a duplicate of MPI_COMM_WORLD.
//
// MPI is initialized (MPI_Init_thread, MPI_THREAD_MULTIPLE requested) if the
// application has not done so, and then finalized at exit; an application
// that initialized MPI itself keeps ownership (it must not finalize MPI while
// a jaccl side channel still exists). Errors are returned, not fatal, on our
// communicator and surface as IoErrors.
//
// MPI calls have no deadline of their own: a rank that never arrives blocks
// the others until the launcher (mpirun) kills the job, which it does when a
// rank dies. The timeout of the group does not apply to this channel.
//
// Built only when MPI was found at configure time (JACCL_HAVE_MPI);
// otherwise every entry point raises a ConfigError saying how to enable it.
#pragma once

#include "jaccl/side_channel.h"

namespace jaccl::detail {

// Whether this build has the MPI channel.
bool mpi_channel_built();

// This process's rank and size in MPI_COMM_WORLD, initializing MPI if needed
// (for the Config code when the side channel is mpi:// and JACCL_RANK /
// JACCL_SIZE are not set). False when the build has no MPI.
bool mpi_rank_size(int* rank, int* size);

// rank / size < 0 / <= 0 mean "take MPI's"; given values must match MPI's
// (ConfigError otherwise). Collective over MPI_COMM_WORLD: every rank must
// create its channel.
AllGatherFn make_mpi_channel(int rank, int size);

}  // namespace jaccl::detail
