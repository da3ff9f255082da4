// Copyright 2026 the jaccl authors.
// The group conformance checks of all_to_all and all_to_allv
// (support/group_conformance.h). Data is bytes, so the element size classes
// (1, 2, 4, 8 bytes) appear as block sizes: multiples of the element size,
// odd counts of elements, empty blocks. Every block's bytes depend on
// (sender, receiver, salt), so a block delivered to the wrong rank or slot
// fails.
#include <span>

#include "support/group_conformance.h"

namespace jaccl::test::group_conformance {

namespace {

// The bytes rank s sends to rank d.
std::vector<uint8_t> block_of(int s, int d, size_t n, int salt) {
  return pattern(s * 131 + d * 7 + 1, n, salt);
}

// in_off / out_off: byte offsets of the buffers (odd ones: unaligned).
void check_all_to_all(Ctx& c, size_t n, size_t in_off = 0, size_t out_off = 0) {
  const int salt = c.salt++;
  c.current = "all_to_all n_bytes=" + std::to_string(n) +
              (in_off + out_off != 0 ? " unaligned" : "");
  const size_t P = static_cast<size_t>(c.size);
  std::vector<uint8_t> in(P * n + in_off), out(P * n + out_off, 0xA5),
      want(P * n);
  for (size_t j = 0; j < P; ++j) {
    auto b = block_of(c.rank, static_cast<int>(j), n, salt);
    std::copy(b.begin(), b.end(), in.begin() + in_off + j * n);
    auto w = block_of(static_cast<int>(j), c.rank, n, salt);
    std::copy(w.begin(), w.end(), want.begin() + j * n);
  }
  const std::vector<uint8_t> keep = in;
  c.g.all_to_all(in.data() + in_off, out.data() + out_off, n);
  compare(c, out.data() + out_off, want.data(), P * n);
  compare(c, in.data(), keep.data(), in.size(), "input was modified");
}

// How many bytes rank s sends rank d in the variable check `salt`: some
// empty, the others odd multiples of esz, one block (0 -> last) `big`.
size_t v_count(int s, int d, int size, size_t esz, int salt, size_t big) {
  if (big != 0 && s == 0 && d == size - 1)
    return big;
  if ((s * 7 + d * 3 + salt) % 5 == 0)
    return 0;
  return esz * static_cast<size_t>(1 + 2 * ((s + 2 * d + salt) % 11));
}

void check_all_to_allv(Ctx& c, size_t esz, size_t big = 0) {
  const int salt = c.salt++;
  c.current = "all_to_allv esz=" + std::to_string(esz) +
              (big ? " big=" + std::to_string(big) : "");
  const int P = c.size;
  std::vector<size_t> send(P), recv(P);
  std::vector<uint8_t> in, want;
  for (int j = 0; j < P; ++j) {
    send[j] = v_count(c.rank, j, P, esz, salt, big);
    recv[j] = v_count(j, c.rank, P, esz, salt, big);
    auto b = block_of(c.rank, j, send[j], salt);
    in.insert(in.end(), b.begin(), b.end());
    auto w = block_of(j, c.rank, recv[j], salt);
    want.insert(want.end(), w.begin(), w.end());
  }
  std::vector<uint8_t> out(want.size(), 0xA5);
  c.g.all_to_allv(in.data(), send, out.data(), recv);
  compare(c, out.data(), want.data(), want.size());
}

// Every rank sends nothing: no data moves, the counts still agree.
void check_all_to_allv_empty(Ctx& c) {
  c.current = "all_to_allv all empty";
  std::vector<size_t> zero(static_cast<size_t>(c.size), 0);
  c.g.all_to_allv(nullptr, zero, nullptr, zero);
  ++c.checks;
}

void check_all_to_all_errors(Ctx& c) {
  const size_t P = static_cast<size_t>(c.size);
  std::vector<uint8_t> buf(P * 16);
  c.current = "all_to_all in place";
  expect_error(c, ErrorKind::Usage, "overlap",
               [&] { c.g.all_to_all(buf.data(), buf.data(), 16); });
  c.current = "all_to_all overlapping";
  expect_error(c, ErrorKind::Usage, "overlap",
               [&] { c.g.all_to_all(buf.data(), buf.data() + 1, 8); });
  std::vector<size_t> few(P + 1, 1);
  c.current = "all_to_allv counts span";
  expect_error(c, ErrorKind::Usage, "send counts",
               [&] { c.g.all_to_allv(buf.data(), few, buf.data() + 64, few); });
  check_all_to_all(c, 5);  // the group still works
  // The last rank expects one byte more from rank 0 than rank 0 sends:
  // every rank reports that pair, before any data moved.
  const int last = c.size - 1;
  std::vector<size_t> send(P, 3), recv(P, 3);
  if (c.rank == last)
    recv[0] = 4;
  std::vector<uint8_t> in(3 * P), out(3 * P + 1);
  c.current = "all_to_allv mismatched counts";
  const std::string want =
      "all_to_allv: rank " + std::to_string(last) +
      " expects 4 bytes from rank 0, but rank 0 sends 3 bytes to rank " +
      std::to_string(last);
  expect_error(c, ErrorKind::Protocol, want,
               [&] { c.g.all_to_allv(in.data(), send, out.data(), recv); });
  check_all_to_allv(c, 4);  // and still works
}

}  // namespace

void run_all_to_all(Ctx& c, bool full) {
  for (size_t esz : {size_t(1), size_t(2), size_t(4), size_t(8)}) {
    for (size_t count : {size_t(0), size_t(1), size_t(7), size_t(1003)})
      check_all_to_all(c, esz * count);
    check_all_to_allv(c, esz);
  }
  check_all_to_allv_empty(c);
  check_all_to_all(c, 1003, 1, 3);
  // Around the staging window and the wire split (2 x 256 KiB per wire),
  // and one block much larger than the others.
  check_all_to_all(c, 65537 * 2);
  check_all_to_allv(c, 8, 300007);
  // Every source alignment mod 64 (TCP pads each message's frame by its
  // source's address), with blocks past the TCP link's 16 KiB read-ahead.
  for (size_t off = 0; off < 64; ++off)
    check_all_to_all(c, 16411, off, (off * 5) % 64);
  if (full) {
    check_all_to_all(c, 600001, 3, 1);
    check_all_to_allv(c, 2, 1200007);
  }
  check_all_to_all_errors(c);
}

}  // namespace jaccl::test::group_conformance
