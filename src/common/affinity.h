// Copyright 2026 the jaccl authors.
// Where the calling thread runs, and a nudge when the scheduler has put two
// ranks that wait for each other on one CPU.
#pragma once

namespace jaccl::detail {

// Moves the calling thread off the CPU it runs on, to another CPU of its
// affinity mask, and leaves that mask as it was (set without this CPU, the
// kernel migrates the thread at once; set back, nothing moves it back).
// False if the mask allows no other CPU or the system refuses.
bool move_off_this_cpu();

}  // namespace jaccl::detail
