// Copyright 2026 the jaccl authors.
// libFuzzer target for the side channel's frame decoder: what SideChannel
// accepts back from an all-gather (src/bootstrap/side_channel.cpp). The
// all-gather is the fuzzer: for each rank's slot it returns either this rank's
// own frame relabelled as that rank (a well-formed peer) with a few
// fuzzer-chosen bytes overwritten, or raw fuzzer bytes. Calls go through the
// public paths (all_gather inline and two-phase, all_gather_bytes,
// all_gather_value, barrier). Oracles: a malformed frame is a jaccl::Error,
// never a crash or an unbounded allocation; a call whose slots are all
// untouched well-formed frames succeeds and returns every slot's payload.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/side_channel.h"
#include "common/error.h"

namespace d = jaccl::detail;

namespace {

constexpr size_t kRankOffset = 32;  // Header::rank (side_channel.cpp)
constexpr uint64_t kFrameMagic = 0x4d52464c4343414aull;  // "JACCLFRM"

struct Gather {
  FuzzedDataProvider& fdp;
  int size;
  bool clean = true;      // every slot of the last call was an untouched frame
  bool all_clean = true;  // ... of every call since the last reset

  void operator()(const char* src, char* dst, size_t n) {
    clean = true;
    for (int r = 0; r < size; ++r) {
      char* slot = dst + static_cast<size_t>(r) * n;
      if (fdp.remaining_bytes() == 0 || fdp.ConsumeIntegralInRange(0, 3) > 0) {
        std::memcpy(slot, src, n);
        // A frame gets the slot's rank; a second-round payload (no header:
        // side_channel.cpp) is copied as it is.
        if (n >= kRankOffset + 4 && std::memcmp(src, &kFrameMagic, 8) == 0) {
          int32_t rank = r;
          std::memcpy(slot + kRankOffset, &rank, sizeof(rank));
        }
        const int edits = fdp.ConsumeIntegralInRange(0, 3);
        for (int e = 0; e < edits && n > 0; ++e) {
          // Mostly the header, where the checks are.
          size_t at = fdp.ConsumeBool()
                          ? fdp.ConsumeIntegralInRange<size_t>(
                                0, std::min<size_t>(n, 56) - 1)
                          : fdp.ConsumeIntegralInRange<size_t>(0, n - 1);
          slot[at] = static_cast<char>(fdp.ConsumeIntegral<uint8_t>());
          clean = false;
        }
      } else {
        auto raw = fdp.ConsumeBytes<char>(n);
        raw.resize(n, 0);
        std::memcpy(slot, raw.data(), n);
        clean = false;
      }
    }
    all_clean = all_clean && clean;
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const int P = fdp.ConsumeIntegralInRange(1, 6);
  const int me = fdp.ConsumeIntegralInRange(0, P - 1);
  const uint64_t fingerprint = fdp.ConsumeIntegral<uint64_t>();
  Gather g{fdp, P};
  d::SideChannel sc(
      me, P, fingerprint,
      [&g](const char* src, char* dst, size_t n) { g(src, dst, n); }, "fuzz",
      d::Millis(0), /*guarded=*/false);
  for (int call = 0; call < 4 && fdp.remaining_bytes() > 0; ++call) {
    const int op = fdp.ConsumeIntegralInRange(0, 3);
    g.all_clean = true;
    try {
      if (op == 0) {
        // Inline (<= 200 bytes) or two-phase payloads.
        const size_t n = fdp.ConsumeIntegralInRange<size_t>(0, 600);
        std::vector<char> in(n, static_cast<char>(call + 1));
        auto out = sc.all_gather(in.data(), n);
        if (g.all_clean && n > 0) {
          for (int r = 0; r < P; ++r) {
            if (std::memcmp(out.data() + static_cast<size_t>(r) * n, in.data(),
                            n) != 0) {
              __builtin_trap();  // a well-formed slot's payload was lost
            }
          }
        }
      } else if (op == 1) {
        auto parts = sc.all_gather_bytes(fdp.ConsumeRandomLengthString(300));
        if (parts.size() != static_cast<size_t>(P)) {
          __builtin_trap();
        }
      } else if (op == 2) {
        sc.all_gather_value(fdp.ConsumeIntegral<uint64_t>());
      } else {
        sc.barrier();
      }
    } catch (const jaccl::Error& e) {
      if (g.all_clean) {
        __builtin_trap();  // well-formed frames were rejected
      }
      if (std::string(e.what()).empty()) {
        __builtin_trap();
      }
    }
  }
  return 0;
}
