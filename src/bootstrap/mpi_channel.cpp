// Copyright 2026 the jaccl authors.
#include "bootstrap/mpi_channel.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "common/error.h"
#include "common/log.h"

#if JACCL_HAVE_MPI
#include <mpi.h>
#endif

namespace jaccl::detail {

#if JACCL_HAVE_MPI

namespace {

std::once_flag g_init_once;

void finalize_if_ours() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    MPI_Finalize();
  }
}

// Initializes MPI unless the application already did; we finalize only what
// we initialized.
void ensure_mpi() {
  std::call_once(g_init_once, [] {
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (finalized) {
      raise(ErrorKind::Config,
            "mpi side channel: MPI was already finalized by the application",
            {.address = "mpi://"});
    }
    if (initialized) {
      return;
    }
    int provided = 0;
    if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided) !=
        MPI_SUCCESS) {
      raise(ErrorKind::Io, "mpi side channel: MPI_Init_thread failed",
            {.address = "mpi://"});
    }
    if (provided < MPI_THREAD_SERIALIZED) {
      JACCL_LOG(Warn, "mpi side channel: MPI provides thread level "
                          << provided
                          << " only; jaccl may call MPI from several threads "
                             "(one at a time)");
    }
    std::atexit(finalize_if_ours);
  });
}

std::string mpi_error_text(int code) {
  char buf[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, buf, &len) != MPI_SUCCESS) {
    return "MPI error " + std::to_string(code);
  }
  return std::string(buf, static_cast<size_t>(len));
}

class MpiAllGather {
 public:
  MpiAllGather(int rank, int size) : rank_(rank), size_(size) {
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm_) != MPI_SUCCESS) {
      raise(ErrorKind::Io, "mpi side channel: MPI_Comm_dup failed",
            {.rank = rank_, .address = "mpi://"});
    }
    MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  }
  ~MpiAllGather() {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
      MPI_Comm_free(&comm_);
    }
  }

  void call(const char* src, char* dst, size_t n) {
    // MPI counts are ints: gather big inputs in slices.
    constexpr size_t kSlice = size_t(1) << 30;
    if (n <= kSlice) {
      check(MPI_Allgather(src, static_cast<int>(n), MPI_BYTE, dst,
                          static_cast<int>(n), MPI_BYTE, comm_));
      return;
    }
    std::vector<char> tmp(kSlice * static_cast<size_t>(size_));
    for (size_t off = 0; off < n; off += kSlice) {
      const size_t len = std::min(kSlice, n - off);
      check(MPI_Allgather(src + off, static_cast<int>(len), MPI_BYTE,
                          tmp.data(), static_cast<int>(len), MPI_BYTE, comm_));
      for (size_t r = 0; r < static_cast<size_t>(size_); ++r) {
        std::memcpy(dst + r * n + off, tmp.data() + r * len, len);
      }
    }
  }

 private:
  void check(int code) const {
    if (code != MPI_SUCCESS) {
      raise(ErrorKind::Io,
            "mpi side channel: MPI_Allgather failed: " + mpi_error_text(code),
            {.rank = rank_, .address = "mpi://"});
    }
  }

  int rank_;
  int size_;
  MPI_Comm comm_ = MPI_COMM_NULL;
};

}  // namespace

bool mpi_channel_built() {
  return true;
}

bool mpi_rank_size(int* rank, int* size) {
  ensure_mpi();
  MPI_Comm_rank(MPI_COMM_WORLD, rank);
  MPI_Comm_size(MPI_COMM_WORLD, size);
  return true;
}

AllGatherFn make_mpi_channel(int rank, int size) {
  int mpi_rank = -1, mpi_size = 0;
  mpi_rank_size(&mpi_rank, &mpi_size);
  if ((rank >= 0 && rank != mpi_rank) || (size > 0 && size != mpi_size)) {
    raise(ErrorKind::Config,
          "mpi side channel: jaccl was configured as rank " +
              std::to_string(rank) + " of " + std::to_string(size) +
              " but MPI_COMM_WORLD says rank " + std::to_string(mpi_rank) +
              " of " + std::to_string(mpi_size) +
              " (leave JACCL_RANK / JACCL_SIZE unset under mpirun)",
          {.rank = mpi_rank, .address = "mpi://"});
  }
  auto impl = std::make_shared<MpiAllGather>(mpi_rank, mpi_size);
  return
      [impl](const char* src, char* dst, size_t n) { impl->call(src, dst, n); };
}

#else  // !JACCL_HAVE_MPI

bool mpi_channel_built() {
  return false;
}

bool mpi_rank_size(int* rank, int* size) {
  (void)rank;
  (void)size;
  return false;
}

AllGatherFn make_mpi_channel(int rank, int size) {
  (void)size;
  raise(ErrorKind::Config,
        "this build has no MPI side channel: install libopenmpi-dev and "
        "openmpi-bin (or run scripts/setup.sh) and reconfigure",
        {.rank = rank, .address = "mpi://"});
}

#endif

}  // namespace jaccl::detail
