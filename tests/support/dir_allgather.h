// Copyright 2026 the jaccl authors.
// Helpers for worker programs (tests/workers): linked into the workers and
// the unit tests alike, so they use no gtest.
//
// dir_all_gather: a user all-gather through a shared directory, the simplest
// side channel a real app could hand to jaccl. Call k of rank r writes
// <dir>/<k>.<r> (a temporary file renamed into place), then reads every
// rank's file of call k, waiting up to `timeout` for each (a TimeoutError
// naming the missing file); the directory is created if missing.
// before_call, if set, runs first on every call
// (a test hook, e.g. to hold a rank at a chosen point).
#pragma once

#include <chrono>
#include <functional>
#include <string>

#include "jaccl/side_channel.h"

namespace jaccl::test {

AllGatherFn dir_all_gather(
    std::string dir, int rank, int size,
    std::chrono::milliseconds timeout = std::chrono::milliseconds(60000),
    std::function<void()> before_call = {});

}  // namespace jaccl::test
