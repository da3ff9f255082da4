// Copyright 2026 the jaccl authors.
// How much longer a sanitizer build takes, for tests and their workers alike.
#pragma once

namespace jaccl::test {

// How many times slower this build runs than a plain one: 4 under TSan, 2
// under ASan, else 1. Tests that start whole jobs, and workers with their
// own deadlines, scale them (and the jobs' JACCL_TIMEOUT) by it, so a slow
// build is not taken for a hang; libfabric's set-up alone is ~10x slower
// under TSan.
constexpr int slowdown() {
#if defined(__SANITIZE_THREAD__)
  return 4;
#elif defined(__SANITIZE_ADDRESS__)
  return 2;
#else
  return 1;
#endif
}

// A TSan build: there the heaviest tests move less data, every path still
// taken (docs/development.md).
constexpr bool under_tsan() {
#if defined(__SANITIZE_THREAD__)
  return true;
#else
  return false;
#endif
}

}  // namespace jaccl::test
