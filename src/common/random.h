// Copyright 2026 the jaccl authors.
// Unpredictable random values (the kernel CSPRNG, getrandom) for nonces,
// epochs and process instance ids.
#pragma once

#include <cstddef>
#include <cstdint>

namespace jaccl::detail {

// Fills n bytes; an Io error if the generator fails.
void random_bytes(void* dst, size_t n);
uint64_t random_u64();

}  // namespace jaccl::detail
