// Copyright 2026 the jaccl authors.
// The TCP star's shared replies (tcp_star_shared.h).
#include "bootstrap/tcp_star_shared.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "common/bytes.h"
#include "common/log.h"
#include "common/random.h"
#include "common/read_file.h"

namespace jaccl::detail::star {

namespace {

constexpr uint32_t kRefMagic = 0x48534a53;              // "SJSH"
constexpr uint64_t kSegmentMagic = 0x4745535241545341;  // "ASTARSEG"
// The segment's header (magic u64, key u64, ranks mapped u64); the result
// follows, cache-line aligned.
constexpr size_t kHeaderBytes = 64;
constexpr size_t kMappedAt = 16;
constexpr const char* kLabelPrefix = "jaccl-star-";
constexpr const char* kSizedBy = "the coordinator's result";

uint64_t fnv1a(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) {
    h = (h ^ c) * 0x100000001b3ull;
  }
  return h;
}

std::atomic_ref<uint64_t> mapped_count(const ShmSegment& seg) {
  return std::atomic_ref<uint64_t>(
      *reinterpret_cast<uint64_t*>(seg.data() + kMappedAt));
}

}  // namespace

std::string shared_label(uint64_t key) {
  char b[40];
  std::snprintf(b, sizeof(b), "%s%016llx", kLabelPrefix,
                static_cast<unsigned long long>(key));
  return b;
}

std::vector<uint8_t> encode_shared_ref(const SharedRef& r) {
  std::vector<uint8_t> b(kSharedRefBytes);
  put_u32(&b[0], kRefMagic);
  put_u32(&b[4], r.pid);
  put_u32(&b[8], static_cast<uint32_t>(r.fd));
  put_u64(&b[12], r.key);
  put_u64(&b[20], r.segment_bytes);
  put_u64(&b[28], r.offset);
  put_u64(&b[36], r.length);
  return b;
}

std::optional<SharedRef> decode_shared_ref(std::span<const uint8_t> b,
                                           std::string* why) {
  if (b.size() != kSharedRefBytes || get_u32(&b[0]) != kRefMagic) {
    *why = "not a shared-result reference (" + std::to_string(b.size()) +
           " bytes)";
    return std::nullopt;
  }
  SharedRef r;
  r.pid = get_u32(&b[4]);
  r.fd = static_cast<int32_t>(get_u32(&b[8]));
  r.key = get_u64(&b[12]);
  r.segment_bytes = get_u64(&b[20]);
  r.offset = get_u64(&b[28]);
  r.length = get_u64(&b[36]);
  if (r.pid == 0 || r.fd < 0) {
    *why = "no process or descriptor (pid " + std::to_string(r.pid) + ", fd " +
           std::to_string(r.fd) + ")";
    return std::nullopt;
  }
  if (r.offset < kHeaderBytes || r.offset > r.segment_bytes ||
      r.length > r.segment_bytes - r.offset) {
    *why = "result at " + std::to_string(r.offset) + " of " +
           std::to_string(r.length) + " bytes lies outside a segment of " +
           std::to_string(r.segment_bytes);
    return std::nullopt;
  }
  return r;
}

uint64_t shared_host_key() {
  const std::string boot =
      read_file_or_empty("/proc/sys/kernel/random/boot_id");
  const std::string pid_ns = read_link_or_empty("/proc/self/ns/pid");
  if (boot.empty() || pid_ns.empty()) {
    return 0;
  }
  return fnv1a(boot + "|" + pid_ns + "|" + std::to_string(::geteuid())) | 1;
}

SharedResults::~SharedResults() {
  if (seg_.data() == nullptr || told_ == 0) {
    return;
  }
  const Deadline dl = Deadline::after(linger_);
  auto mapped = mapped_count(seg_);
  while (mapped.load() < static_cast<uint64_t>(told_)) {
    if (dl.expired()) {
      JACCL_LOG(Info, "coordinator " << address_ << ": "
                                     << told_ - static_cast<int>(mapped.load())
                                     << " rank(s) had not mapped the last "
                                     << "shared result when it closed");
      return;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

std::optional<SharedRef> SharedResults::publish(const char* result,
                                                size_t bytes, int ranks) {
  const size_t need = kHeaderBytes + bytes;
  if (seg_.data() == nullptr || seg_.size() < need) {
    // Half again as much as the last one, or what this takes: a bigger
    // result later needs another segment, which every rank maps anew.
    const size_t page = 4096;
    const size_t size =
        (std::max(need, seg_.size() + seg_.size() / 2) + page - 1) / page *
        page;
    const uint64_t key = random_u64();
    try {
      seg_ = ShmSegment();
      seg_ = ShmSegment::create_anonymous(shared_label(key), size, 0, SIZE_MAX,
                                          kSizedBy);
    } catch (const Error& e) {
      if (!warned_) {
        warned_ = true;
        JACCL_LOG(Info, "coordinator " << address_ << ": results go over TCP "
                                       << "to every rank: " << e.what());
      }
      return std::nullopt;
    }
    key_ = key;
    put_u64(reinterpret_cast<uint8_t*>(seg_.data()), kSegmentMagic);
    put_u64(reinterpret_cast<uint8_t*>(seg_.data()) + 8, key_);
  }
  if (bytes != 0) {
    std::memcpy(seg_.data() + kHeaderBytes, result, bytes);
  }
  told_ = ranks;
  return SharedRef{static_cast<uint32_t>(::getpid()),
                   seg_.fd(),
                   key_,
                   seg_.size(),
                   kHeaderBytes,
                   bytes};
}

namespace {

// Opens rank 0's memfd through /proc/<pid>/fd/<fd>, checking by its name
// that it is the one the reference means.
ShmSegment open_ref(const SharedRef& ref, const ErrorContext& ctx) {
  std::string why;
  const std::string label = shared_label(ref.key);
  Fd fd = open_memfd_of(static_cast<int>(ref.pid), ref.fd, label, &why);
  if (!fd.valid()) {
    const int err = errno;  // before kill() sets its own
    if (::kill(static_cast<pid_t>(ref.pid), 0) != 0 && errno == ESRCH) {
      raise(ErrorKind::PeerLost,
            "the coordinator (rank 0, pid " + std::to_string(ref.pid) +
                ") exited before this rank read its shared result",
            ctx);
    }
    ErrorContext c = ctx;
    c.address =
        "/proc/" + std::to_string(ref.pid) + "/fd/" + std::to_string(ref.fd);
    c.sys_errno = err;
    raise(ErrorKind::Io,
          "cannot reach the coordinator's shared result (" + why +
              "): does this rank run in rank 0's pid namespace as its user?",
          c);
  }
  return ShmSegment::adopt(std::move(fd), ref.segment_bytes, ctx.rank, label,
                           kSizedBy);
}

}  // namespace

const char* SharedReader::locate(const SharedRef& ref,
                                 const ErrorContext& ctx) {
  const bool fresh = !seg_ || key_ != ref.key;
  if (fresh) {
    // Never destroyed: a rank may still read while the process exits.
    static auto* mu = new std::mutex;
    static auto* mapped = new std::map<uint64_t, std::weak_ptr<ShmSegment>>;
    std::lock_guard<std::mutex> lock(*mu);
    for (auto it = mapped->begin(); it != mapped->end();) {
      it = it->second.expired() ? mapped->erase(it) : std::next(it);
    }
    std::shared_ptr<ShmSegment> s = (*mapped)[ref.key].lock();
    if (!s) {
      s = std::make_shared<ShmSegment>(open_ref(ref, ctx));
      (*mapped)[ref.key] = s;
    }
    seg_ = std::move(s);
    key_ = ref.key;
  }
  const auto* base = reinterpret_cast<const uint8_t*>(seg_->data());
  if (seg_->size() != ref.segment_bytes || get_u64(base) != kSegmentMagic ||
      get_u64(base + 8) != ref.key) {
    raise(ErrorKind::Protocol,
          "shared memory memfd:" + shared_label(ref.key) +
              " is not the coordinator's result it names",
          ctx);
  }
  if (fresh) {
    mapped_count(*seg_).fetch_add(1);  // this rank has mapped it
  }
  return seg_->data() + ref.offset;
}

void SharedReader::read(const SharedRef& ref, char* dst,
                        const ErrorContext& ctx) {
  const char* at = locate(ref, ctx);
  if (ref.length != 0) {
    std::memcpy(dst, at, ref.length);
  }
}

}  // namespace jaccl::detail::star
