// Copyright 2026 the jaccl authors.
// libFuzzer target for the TCP star's reply coding (src/bootstrap/
// tcp_star_codec.cpp): what a rank decodes from rank 0's coded reply,
// whole or fed piece by piece as it arrives (PartsDecoder). Two shapes of
// input:
//   - raw coded bytes: decode_parts and the same bytes fed in pieces (sizes
//     the fuzzer picks) must agree (both refuse, or both give the same
//     bytes), never crash or write past the result;
//   - parts chosen by the fuzzer (runs of a repeated byte, rank-like
//     counters, noise): encode_parts, then both decoders give them back.
#include <fuzzer/FuzzedDataProvider.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/tcp_star.h"

namespace star = jaccl::detail::star;

namespace {

// Both ways over `coded`, the pieces `piece` bytes long (at least 1);
// aborts when they disagree.
void decode_both(const std::vector<uint8_t>& coded, size_t part, size_t total,
                 size_t piece, const std::vector<char>* want) {
  std::vector<char> a(total, 0x5a);
  std::string why_a;
  const bool ok_a = star::decode_parts(coded, part, a.data(), total, &why_a);
  std::vector<char> b(total, 0x5a);
  std::string why_b;
  star::PartsDecoder dec(b.data(), total, part, coded.size());
  bool ok_b = true;
  for (size_t at = 0; at < coded.size() && ok_b; at += piece) {
    ok_b =
        dec.feed(coded.data() + at, std::min(piece, coded.size() - at), &why_b);
  }
  ok_b = ok_b && dec.finish(&why_b);
  if (ok_a != ok_b || (!ok_b && why_b.empty())) {
    std::abort();  // pieces must accept exactly what the whole accepts
  }
  if (ok_b && a != b) {
    std::abort();
  }
  if (!ok_a && why_a.empty()) {
    std::abort();  // a refusal says why
  }
  if (want != nullptr && (!ok_a || a != *want)) {
    std::abort();  // what encode_parts wrote comes back whole
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider fdp(data, size);
  const size_t part = fdp.ConsumeIntegralInRange<size_t>(1, 96);
  const size_t parts = fdp.ConsumeIntegralInRange<size_t>(1, 64);
  const size_t total = part * parts;
  const size_t piece = fdp.ConsumeIntegralInRange<size_t>(1, 64);
  if (fdp.ConsumeBool()) {
    decode_both(fdp.ConsumeRemainingBytes<uint8_t>(), part, total, piece,
                nullptr);
    return 0;
  }
  std::vector<char> src(total);
  for (size_t p = 0; p < parts; ++p) {
    char* at = src.data() + p * part;
    switch (fdp.ConsumeIntegralInRange(0, 2)) {
      case 0:  // a repeated byte
        std::memset(at, fdp.ConsumeIntegral<char>(), part);
        break;
      case 1:  // the part before it with a counter in it (a rank, a port)
        if (p > 0) {
          std::memcpy(at, at - part, part);
        }
        at[fdp.ConsumeIntegralInRange<size_t>(0, part - 1)] =
            static_cast<char>(p);
        break;
      default: {
        auto raw = fdp.ConsumeBytes<char>(part);
        raw.resize(part, 0);
        std::memcpy(at, raw.data(), part);
      }
    }
  }
  decode_both(star::encode_parts(src.data(), part, total), part, total, piece,
              &src);
  return 0;
}
