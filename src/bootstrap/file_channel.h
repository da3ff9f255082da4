// Copyright 2026 the jaccl authors.
// The file:// side channel: the store protocol (store_channel.h) over a job
// directory on a filesystem every rank mounts.
#pragma once

#include <memory>
#include <string>

#include "bootstrap/store_channel.h"
#include "common/deadline.h"
#include "jaccl/side_channel.h"

namespace jaccl::detail {

// A job namespace in a shared directory: <dir>/<job>/ (created if missing;
// dir itself must exist). NFS-safe: values are written to a temporary file in
// the same directory and rename()d into place; new files are found by
// listing the directory (readdir), which an NFS client revalidates, rather
// than by open() alone, which its negative-lookup cache may answer from
// memory. No inotify.
std::shared_ptr<RendezvousStore> make_file_store(const std::string& dir,
                                                 const std::string& job,
                                                 int rank);

struct FileChannelOptions {
  std::string dir;  // shared directory (absolute path)
  std::string job;  // job id (uri.h job_id())
  int rank = -1;
  int size = 0;
  Millis timeout{60000};
};

// Polls with backoff (1 ms doubling to 100 ms).
AllGatherFn make_file_channel(const FileChannelOptions& options);

}  // namespace jaccl::detail
