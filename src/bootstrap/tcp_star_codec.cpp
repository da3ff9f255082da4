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

enum class Varint { Ok, Short, Bad };

// One varint at in[*pos...]: Short when the bytes end inside it, Bad when it
// runs past 64 bits.
Varint get_varint(std::span<const uint8_t> in, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (*pos >= in.size()) {
      return Varint::Short;
    }
    const uint8_t b = in[(*pos)++];
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) {
      return shift < 63 || b <= 1 ? Varint::Ok : Varint::Bad;
    }
  }
  return Varint::Bad;
}

// The first c bytes of in to out, c a multiple of 8, a word at a time.
void copy_words(char* __restrict out, const char* __restrict in, size_t c) {
  for (size_t k = 0; k < c; k += 8) {
    uint64_t a;
    std::memcpy(&a, in + k, 8);
    std::memcpy(out + k, &a, 8);
  }
}

// out = in ^ prev over c bytes, c a multiple of 8, a word at a time (out
// never overlaps prev or in).
void xor_words(char* __restrict out, const uint8_t* __restrict in,
               const char* __restrict prev, size_t c) {
  for (size_t k = 0; k < c; k += 8) {
    uint64_t a, b;
    std::memcpy(&a, in + k, 8);
    std::memcpy(&b, prev + k, 8);
    a ^= b;
    std::memcpy(out + k, &a, 8);
  }
}

// memcpy for the short copies a coding is made of (a part's unchanged
// bytes, often a few dozen), without a call each: at 4096 ranks a rank
// decodes millions of them per call.
void copy_short(char* __restrict out, const char* __restrict in, size_t c) {
  const size_t w = c & ~size_t(7);
  copy_words(out, in, w);
  for (size_t k = w; k < c; ++k) {
    out[k] = in[k];
  }
}

// xor_words for any c.
void xor_into(char* __restrict out, const uint8_t* __restrict in,
              const char* __restrict prev, size_t c) {
  const size_t w = c & ~size_t(7);
  xor_words(out, in, prev, w);
  for (size_t k = w; k < c; ++k) {
    out[k] = static_cast<char>(in[k] ^ static_cast<uint8_t>(prev[k]));
  }
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

PartsDecoder::PartsDecoder(char* dst, size_t total, size_t part, size_t coded)
    : dst_(dst), total_(total), part_(part), coded_(coded) {}

bool PartsDecoder::feed(const uint8_t* in, size_t len, std::string* why) {
  if (len > coded_ - pos_) {
    *why = std::to_string(pos_ + len) + " coded bytes where " +
           std::to_string(coded_) + " were announced";
    return false;
  }
  const uint8_t* end = in + len;
  while (in < end) {
    if (literal_ == 0 && head_len_ == 0 && o_ >= part_) {
      in = short_runs(in, end);
      if (in == end) {
        break;
      }
    }
    if (literal_ > 0) {
      // Literal bytes: XORed with the previous part's (none before the
      // first), in pieces of at most a part so that no piece reads what it
      // writes.
      size_t c = static_cast<size_t>(
          std::min<uint64_t>(literal_, static_cast<size_t>(end - in)));
      pos_ += c;
      literal_ -= c;
      if (o_ < part_) {
        const size_t first = std::min(c, part_ - o_);
        std::memcpy(dst_ + o_, in, first);
        o_ += first;
        in += first;
        c -= first;
      }
      while (c > 0) {
        const size_t k = std::min(c, part_);
        xor_into(dst_ + o_, in, dst_ + o_ - part_, k);
        o_ += k;
        in += k;
        c -= k;
      }
      continue;
    }
    // A run header: read where it lies, unless a piece ended inside it
    // (then gathered in head_, a byte at a time, until it is whole).
    const size_t token = pos_ - head_len_;
    std::span<const uint8_t> h(in, static_cast<size_t>(end - in));
    if (head_len_ > 0) {
      head_[head_len_++] = *in++;
      ++pos_;
      h = std::span<const uint8_t>(head_.data(), head_len_);
    }
    size_t at = 0;
    uint64_t z = 0, l = 0;
    const Varint a = get_varint(h, &at, &z);
    const Varint b = a == Varint::Ok ? get_varint(h, &at, &l) : a;
    if (b == Varint::Bad) {
      *why = "malformed run header at byte " + std::to_string(token);
      return false;
    }
    if (b == Varint::Short) {
      if (head_len_ == 0) {  // under 20 bytes: each varint is at most 10
        std::memcpy(head_.data(), in, h.size());
        head_len_ = h.size();
        in = end;
        pos_ += h.size();
      }
      continue;
    }
    if (head_len_ == 0) {
      in += at;
      pos_ += at;
    }
    head_len_ = 0;
    if (!start_run(z, l, why)) {
      return false;
    }
  }
  return true;
}

// The common shape at thousands of ranks (frames alike but for a few
// bytes: two short runs a part, millions a call), decoded without the
// general path's bookkeeping: whole runs of this piece whose counts are one
// byte each and no longer than a part, past the first part (so every byte
// they read from the previous part is already written). Stops, having
// consumed whole runs only, at the first run of another shape, which the
// general path then takes (and checks).
const uint8_t* PartsDecoder::short_runs(const uint8_t* in, const uint8_t* end) {
  const uint8_t* p = in;
  size_t o = o_;
  while (end - p >= 2) {
    const size_t z = p[0], l = p[1];
    if (((z | l) & 0x80) != 0 || z > part_ || l > part_ ||
        l > static_cast<size_t>(end - p - 2) || z + l > total_ - o) {
      break;
    }
    // Whole words, past the run's end when there is room: the bytes
    // written beyond it are written again by what follows.
    const size_t zw = (z + 7) & ~size_t(7), lw = (l + 7) & ~size_t(7);
    if (zw <= part_ && lw <= part_ && o + std::max(zw, z + lw) <= total_ &&
        lw <= static_cast<size_t>(end - p - 2)) {
      copy_words(dst_ + o, dst_ + o - part_, zw);
      xor_words(dst_ + o + z, p + 2, dst_ + o + z - part_, lw);
    } else {
      copy_short(dst_ + o, dst_ + o - part_, z);
      xor_into(dst_ + o + z, p + 2, dst_ + o + z - part_, l);
    }
    o += z + l;
    p += 2 + l;
  }
  pos_ += static_cast<size_t>(p - in);
  o_ = o;
  return p;
}

// A run of z unchanged bytes, then l literal ones: writes the unchanged
// bytes and sets up the literal.
bool PartsDecoder::start_run(uint64_t z, uint64_t l, std::string* why) {
  if (z > total_ - o_ || l > total_ - o_ - z || l > coded_ - pos_) {
    *why = "a run of " + std::to_string(z) + "+" + std::to_string(l) +
           " bytes at byte " + std::to_string(o_) + " overruns the " +
           std::to_string(total_) + "-byte result";
    return false;
  }
  // Unchanged bytes: the previous part's (zeros before the first part).
  size_t left = static_cast<size_t>(z);
  if (o_ < part_) {
    const size_t zero = std::min(left, part_ - o_);
    std::memset(dst_ + o_, 0, zero);
    o_ += zero;
    left -= zero;
  }
  while (left > 0) {
    const size_t c = std::min(left, part_);  // source ends before o_
    if (c <= 256) {
      copy_short(dst_ + o_, dst_ + o_ - part_, c);
    } else {
      std::memcpy(dst_ + o_, dst_ + o_ - part_, c);
    }
    o_ += c;
    left -= c;
  }
  literal_ = l;
  return true;
}

bool PartsDecoder::finish(std::string* why) const {
  if (head_len_ > 0) {
    *why = "truncated run header at byte " + std::to_string(pos_ - head_len_);
    return false;
  }
  if (pos_ != coded_ || literal_ > 0) {
    *why = "the coding ends after " + std::to_string(pos_) + " of " +
           std::to_string(coded_) + " bytes";
    return false;
  }
  if (o_ != total_) {
    *why = "it decodes to " + std::to_string(o_) + " of " +
           std::to_string(total_) + " bytes";
    return false;
  }
  return true;
}

bool decode_parts(std::span<const uint8_t> coded, size_t part, char* dst,
                  size_t total, std::string* why) {
  PartsDecoder d(dst, total, part, coded.size());
  return d.feed(coded.data(), coded.size(), why) && d.finish(why);
}

}  // namespace jaccl::detail::star
