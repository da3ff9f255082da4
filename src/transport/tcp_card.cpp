// Copyright 2026 the jaccl authors.
#include "transport/tcp_card.h"

#include <unistd.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

#include "common/affinity.h"
#include "common/bytes.h"
#include "common/error.h"
#include "common/net.h"
#include "common/read_file.h"
#include "transport/interfaces.h"

namespace jaccl::detail {

namespace {

// A card is binary: every rank decodes every rank's card, so at a thousand
// ranks a million decodes; as JSON (through nlohmann's DOM) they were
// seconds of CPU in every job's start-up. Little-endian: magic u32, rank
// u32, port u16, wires u16, wires_set u8, pid u32, cpus u32, the CPU mask
// (CpuMask::kWords u64, then u32 beyond), then the strings hostname, boot id,
// IPC and network namespaces (u32 length + bytes each), then the address list
// and the ofi endpoints (u32 count, then strings). Nothing may follow.
constexpr uint32_t kCardMagic = 0x3344434a;  // "JCD3"
constexpr size_t kMaskBytes = CpuMask::kWords * 8 + 4;
constexpr size_t kFixedBytes = 4 + 4 + 2 + 2 + 1 + 4 + 4 + kMaskBytes;

void put_string(std::string& out, const std::string& v) {
  uint8_t n[4];
  put_u32(n, static_cast<uint32_t>(v.size()));
  out.append(reinterpret_cast<const char*>(n), 4);
  out += v;
}

// Reads what encode_card wrote; false (and *why) on anything else.
class CardReader {
 public:
  explicit CardReader(std::string_view b) : b_(b) {}
  bool u64(uint64_t* v) {
    if (!room(8)) {
      return false;
    }
    *v = get_u64(at());
    pos_ += 8;
    return true;
  }
  bool u32(uint32_t* v) {
    if (!room(4)) {
      return false;
    }
    *v = get_u32(at());
    pos_ += 4;
    return true;
  }
  bool u16(uint16_t* v) {
    if (!room(2)) {
      return false;
    }
    *v = get_u16(at());
    pos_ += 2;
    return true;
  }
  bool u8(uint8_t* v) {
    if (!room(1)) {
      return false;
    }
    *v = *at();
    pos_ += 1;
    return true;
  }
  bool view(std::string_view* v) {
    uint32_t n = 0;
    if (!u32(&n) || !room(n)) {
      return false;
    }
    *v = b_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  bool str(std::string* v) {
    std::string_view t;
    if (!view(&t)) {
      return false;
    }
    v->assign(t);
    return true;
  }
  // Shares like's copy where the text is the same.
  bool text(SharedText* v, const SharedText& like) {
    std::string_view t;
    if (!view(&t)) {
      return false;
    }
    *v = like.shared_or_new(t);
    return true;
  }
  // Shares like's list where it reads the same (compared in place: no
  // strings made for a list that is like's).
  bool list(SharedList* v, const SharedList& like) {
    uint32_t n = 0;
    if (!u32(&n) || n > b_.size() - pos_) {  // each takes 4 bytes at least
      return false;
    }
    const size_t start = pos_;
    bool same = n == like.size();
    for (uint32_t i = 0; i < n; ++i) {
      std::string_view t;
      if (!view(&t)) {
        return false;
      }
      same = same && t == like.list()[i];
    }
    if (same) {
      *v = like;
      return true;
    }
    pos_ = start;
    SharedList::List out(n);
    for (auto& s : out) {
      if (!str(&s)) {
        return false;
      }
    }
    *v = SharedList(std::move(out));
    return true;
  }
  bool done() const { return pos_ == b_.size(); }

 private:
  bool room(size_t n) const { return n <= b_.size() - pos_; }
  const uint8_t* at() const {
    return reinterpret_cast<const uint8_t*>(b_.data()) + pos_;
  }
  std::string_view b_;
  size_t pos_ = 0;
};

// Plain reads, not an ifstream: a stream's first use builds the process's
// locale facets, a cost every rank of a large job paid at start-up.
std::string read_first_line(const char* path) {
  std::string text = read_file_or_empty(path);
  text.resize(std::min(text.size(), text.find('\n')));
  return text;
}

}  // namespace

std::string TcpCard::describe() const {
  std::string s = "rank " + std::to_string(rank) + " (" +
                  (hostname.empty() ? "?" : hostname.str()) + ", ";
  if (listens()) {
    s += HostPort{addresses.front(), port}.str();
  } else {
    s += "not listening";
  }
  return s + ")";
}

TcpCard local_card(int rank, int wires, bool wires_set) {
  TcpCard c;
  c.rank = rank;
  c.wires = wires;
  c.wires_set = wires_set;
  char host[HOST_NAME_MAX + 1] = {0};
  if (::gethostname(host, sizeof(host) - 1) == 0) {
    c.hostname = host;
  }
  c.boot_id = read_first_line("/proc/sys/kernel/random/boot_id");
  c.ipc_ns = read_link_or_empty("/proc/self/ns/ipc");
  c.net_ns = read_link_or_empty("/proc/self/ns/net");
  c.pid = static_cast<int>(::getpid());
  c.cpus = allowed_cpu_count();
  c.cpu_mask = cpu_mask();
  return c;
}

std::string encode_card(const TcpCard& c) {
  uint8_t fixed[kFixedBytes];
  put_u32(fixed, kCardMagic);
  put_u32(fixed + 4, static_cast<uint32_t>(c.rank));
  put_u16(fixed + 8, c.port);
  put_u16(fixed + 10, static_cast<uint16_t>(c.wires));
  fixed[12] = c.wires_set ? 1 : 0;
  put_u32(fixed + 13, static_cast<uint32_t>(c.pid));
  put_u32(fixed + 17, static_cast<uint32_t>(c.cpus));
  for (int w = 0; w < CpuMask::kWords; ++w) {
    put_u64(fixed + 21 + 8 * w, c.cpu_mask.bits[w]);
  }
  put_u32(fixed + 21 + 8 * CpuMask::kWords, c.cpu_mask.beyond);
  std::string out(reinterpret_cast<const char*>(fixed), sizeof(fixed));
  for (const SharedText* v : {&c.hostname, &c.boot_id, &c.ipc_ns, &c.net_ns}) {
    put_string(out, v->str());
  }
  for (const auto* list : {&c.addresses, &c.ofi}) {
    uint8_t n[4];
    put_u32(n, static_cast<uint32_t>(list->size()));
    out.append(reinterpret_cast<const char*>(n), 4);
    for (const auto& v : *list) {
      put_string(out, v);
    }
  }
  return out;
}

TcpCard decode_card(std::string_view bytes, int from, int me,
                    const TcpCard* like) {
  auto bad = [&](const Detail& why) -> TcpCard {
    raise(ErrorKind::Protocol,
          rank_ref(from) + " published a malformed TCP card (" + why + ")",
          {.rank = me, .peer = from});
  };
  if (!bytes.empty() && bytes.front() == '{') {
    return bad(
        "a JSON card, as jaccl wrote them before: run one jaccl version on "
        "every rank");
  }
  CardReader in(bytes);
  uint32_t magic = 0, rank = 0, pid = 0, cpus = 0;
  uint16_t port = 0, wires = 0;
  uint8_t wires_set = 0;
  if (!in.u32(&magic) || magic != kCardMagic) {
    return bad("not a jaccl card of this version");
  }
  TcpCard c;
  const TcpCard none;
  const TcpCard& l = like != nullptr ? *like : none;
  if (!in.u32(&rank) || !in.u16(&port) || !in.u16(&wires) ||
      !in.u8(&wires_set) || !in.u32(&pid) || !in.u32(&cpus) ||
      !in.u64(&c.cpu_mask.bits[0]) || !in.u64(&c.cpu_mask.bits[1]) ||
      !in.u64(&c.cpu_mask.bits[2]) || !in.u32(&c.cpu_mask.beyond) ||
      !in.text(&c.hostname, l.hostname) || !in.text(&c.boot_id, l.boot_id) ||
      !in.text(&c.ipc_ns, l.ipc_ns) || !in.text(&c.net_ns, l.net_ns) ||
      !in.list(&c.addresses, l.addresses) || !in.list(&c.ofi, l.ofi)) {
    return bad("cut short or a length past its end");
  }
  if (!in.done()) {
    return bad("bytes after its end");
  }
  if (rank > INT_MAX || pid > INT_MAX || wires_set > 1) {
    return bad("a field out of range");
  }
  c.rank = static_cast<int>(rank);
  c.port = port;
  c.wires = wires;
  c.wires_set = wires_set != 0;
  c.pid = static_cast<int>(pid);
  c.cpus = static_cast<int>(static_cast<int32_t>(cpus));
  if (c.rank != from) {
    return bad("it claims to be " + rank_ref(c.rank));
  }
  if (c.wires < 1 || c.wires > 64) {
    return bad("wires " + std::to_string(c.wires) + " out of range 1..64");
  }
  if (c.cpus < 0 || c.cpus > (1 << 20)) {
    return bad("cpus " + std::to_string(c.cpus) + " out of range");
  }
  if ((c.port == 0) != c.addresses.empty()) {
    return bad("a port without an address or an address without a port");
  }
  for (const auto& a : c.addresses) {
    if (!is_ip_literal(a)) {
      return bad("'" + a + "' is not a numeric IP address");
    }
  }
  return c;
}

std::vector<TcpCard> exchange_cards(SideChannel& sc, const TcpCard& mine) {
  std::vector<TcpCard> cards;
  cards.reserve(static_cast<size_t>(sc.size()));
  // Decoded where the bytes arrived: no string per rank in between.
  sc.all_gather_bytes(encode_card(mine), [&](int r, std::string_view raw) {
    cards.push_back(
        decode_card(raw, r, sc.rank(), cards.empty() ? &mine : &cards.back()));
    if (cards.back().wires != mine.wires) {
      raise(ErrorKind::Config,
            rank_ref(r) + " uses " + std::to_string(cards.back().wires) +
                " wires per peer (JACCL_WIRES) but this rank uses " +
                std::to_string(mine.wires),
            {.rank = sc.rank(), .peer = r});
    }
  });
  return cards;
}

}  // namespace jaccl::detail
