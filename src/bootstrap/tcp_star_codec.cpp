// Copyright 2026 the jaccl authors.
// The star's reply coding. Rank 0 sends the same size * n bytes to every
// rank, so at thousands of ranks the reply is most of the coordinator's work
// (4095 copies of 1 MiB at 4096 ranks). What the side channel gathers is
// alike from rank to rank: fixed frames whose headers differ in the rank
// and a nonce, cards that differ in a port or an address, zero padding. So
// each rank's part is XORed with the part before it, and the result is sent
// as runs: a varint count of zero bytes (copy the previous part), a varint
// count of literal bytes, those bytes. Encoded once per call, decoded by each
// rank at memcpy speed for the zero runs.
#include <algorithm>
#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "bootstrap/tcp_star.h"

namespace jaccl::detail::star {

namespace {

// A literal ends at a run of this many unchanged bytes: shorter runs cost
// more as a token than as literal bytes.
constexpr size_t kMinRun = 4;

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

bool get_varint(std::span<const uint8_t> in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= in.size()) {
      return false;
    }
    const uint8_t b = in[(*pos)++];
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      return shift < 63 || b <= 1;
    }
  }
  return false;
}

}  // namespace

std::vector<uint8_t> encode_parts(const char* src, size_t part, size_t total) {
  std::vector<uint8_t> out;
  out.reserve(total / 4 + 16);
  auto delta = [&](size_t k) -> uint8_t {
    return static_cast<uint8_t>(src[k] ^ (k >= part ? src[k - part] : 0));
  };
  size_t i = 0;
  while (i < total) {
    size_t z = i;
    // Unchanged words first, then bytes.
    if (part >= 8) {
      while (z + 8 <= total && z >= part &&
             std::memcmp(src + z, src + z - part, 8) == 0) {
        z += 8;
      }
    }
    while (z < total && delta(z) == 0) {
      ++z;
    }
    size_t end = z, zeros = 0;
    for (size_t k = z; k < total; ++k) {
      if (delta(k) != 0) {
        zeros = 0;
        end = k + 1;
      } else if (++zeros == kMinRun) {
        break;
      }
    }
    put_varint(out, z - i);
    put_varint(out, end - z);
    for (size_t k = z; k < end; ++k) {
      out.push_back(delta(k));
    }
    i = end;
  }
  return out;
}

namespace {

// decode_parts, reading `len` coded bytes at `in`. When `in` lies inside
// dst (decode_parts_in_place: the coded bytes at its end), every token's
// output must stay below the input it has not read yet; a token that would
// overtake it first moves the rest of the input aside (never for what
// encode_parts writes: past its first token, each token writes at least as
// many bytes as it reads).
bool decode(const uint8_t* in, size_t len, size_t part, char* dst, size_t total,
            bool in_place, std::string* why) {
  const size_t base = total - len;  // in place: where the input starts
  std::vector<uint8_t> aside;
  std::span<const uint8_t> coded(in, len);
  size_t pos = 0, o = 0;
  while (pos < coded.size()) {
    const size_t token = pos;
    uint64_t z = 0, l = 0;
    if (!get_varint(coded, &pos, &z) || !get_varint(coded, &pos, &l)) {
      *why = "truncated run header at byte " + std::to_string(pos);
      return false;
    }
    if (z > total - o || l > total - o - z || l > coded.size() - pos) {
      *why = "a run of " + std::to_string(z) + "+" + std::to_string(l) +
             " bytes at byte " + std::to_string(o) + " overruns the " +
             std::to_string(total) + "-byte result";
      return false;
    }
    if (in_place && o + z > base + pos) {
      aside.assign(coded.begin() + static_cast<ptrdiff_t>(token), coded.end());
      coded = aside;
      pos -= token;
      in_place = false;
    }
    // Unchanged bytes: the previous part's (none before the first part).
    size_t left = z;
    if (o < part) {
      const size_t zero = std::min(left, part - o);
      std::memset(dst + o, 0, zero);
      o += zero;
      left -= zero;
    }
    while (left > 0) {
      const size_t c = std::min(left, part);  // source ends before o
      std::memcpy(dst + o, dst + o - part, c);
      o += c;
      left -= c;
    }
    // Literal bytes, each read before it is overwritten (in place, the
    // output is at or below the input).
    for (uint64_t k = 0; k < l; ++k, ++o) {
      const uint8_t prev =
          o >= part ? static_cast<uint8_t>(dst[o - part]) : uint8_t{0};
      dst[o] = static_cast<char>(coded[pos + k] ^ prev);
    }
    pos += l;
  }
  if (o != total) {
    *why = "it decodes to " + std::to_string(o) + " of " +
           std::to_string(total) + " bytes";
    return false;
  }
  return true;
}

}  // namespace

bool decode_parts(std::span<const uint8_t> coded, size_t part, char* dst,
                  size_t total, std::string* why) {
  return decode(coded.data(), coded.size(), part, dst, total, false, why);
}

bool decode_parts_in_place(char* dst, size_t total, size_t len, size_t part,
                           std::string* why) {
  if (len > total) {
    *why = std::to_string(len) + " coded bytes do not fit the " +
           std::to_string(total) + "-byte result";
    return false;
  }
  return decode(reinterpret_cast<const uint8_t*>(dst + (total - len)), len,
                part, dst, total, true, why);
}

}  // namespace jaccl::detail::star
