// Copyright 2026 the jaccl authors.
#include "bootstrap/file_channel.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"
#include "common/random.h"

namespace jaccl::detail {

namespace {

class FileStore final : public RendezvousStore {
 public:
  FileStore(std::string dir, int rank) : dir_(std::move(dir)), rank_(rank) {
    where_ = "directory " + dir_;
    ensure_dir();
  }

  const std::string& where() const override { return where_; }
  const std::string& address() const override { return dir_; }

  void put(const std::string& key, std::string_view value) override {
    const std::string final_path = path(key);
    const std::string tmp = dir_ + "/.tmp-" + file_name(key) + "-" +
                            std::to_string(::getpid()) + "-" +
                            std::to_string(random_u64());
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
      fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
      if (fd < 0 && errno == ENOENT && attempt == 0) {
        ensure_dir();  // removed by the clean-up of an earlier run
      }
    }
    if (fd < 0) {
      fail("cannot create " + tmp, errno);
    }
    size_t off = 0;
    while (off < value.size()) {
      ssize_t w = ::write(fd, value.data() + off, value.size() - off);
      if (w < 0 && errno == EINTR)
        continue;
      if (w <= 0) {
        int err = errno;
        ::close(fd);
        ::unlink(tmp.c_str());
        fail("cannot write " + tmp, err);
      }
      off += static_cast<size_t>(w);
    }
    // close() is where NFS reports write-back errors.
    if (::close(fd) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail("cannot write " + tmp, err);
    }
    if (::rename(tmp.c_str(), final_path.c_str()) != 0) {
      int err = errno;
      ::unlink(tmp.c_str());
      fail("cannot rename " + tmp + " to " + final_path, err);
    }
  }

  std::vector<std::optional<std::string>> get(
      const std::vector<std::string>& keys) override {
    // List first: readdir makes an NFS client revalidate the directory, so
    // a file created by another host is seen although an earlier open()
    // of that name failed (negative-lookup cache).
    auto present = list_names();
    std::vector<std::optional<std::string>> out(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      const std::string name = file_name(keys[i]);
      if (!std::binary_search(present.begin(), present.end(), name)) {
        continue;
      }
      out[i] = read_file(dir_ + "/" + name);
    }
    return out;
  }

  void remove(const std::vector<std::string>& keys) noexcept override {
    for (const auto& k : keys) {
      ::unlink(path(k).c_str());
    }
  }

  std::vector<std::string> list() override {
    auto names = list_names();
    for (auto& n : names) {
      std::replace(n.begin(), n.end(), '.', '/');
    }
    return names;
  }

  void finish() noexcept override { ::rmdir(dir_.c_str()); }

 private:
  // "E/3/7" -> "E.3.7" (keys hold no dots).
  static std::string file_name(const std::string& key) {
    std::string s = key;
    std::replace(s.begin(), s.end(), '/', '.');
    return s;
  }
  std::string path(const std::string& key) const {
    return dir_ + "/" + file_name(key);
  }

  [[noreturn]] void fail(const std::string& what, int err) const {
    raise(ErrorKind::Io, "file side channel: " + what,
          {.rank = rank_, .address = dir_, .sys_errno = err});
  }

  void ensure_dir() {
    if (::mkdir(dir_.c_str(), 0777) != 0 && errno != EEXIST) {
      int err = errno;
      std::string parent = dir_.substr(0, dir_.find_last_of('/'));
      if (err == ENOENT) {
        raise(ErrorKind::Config,
              "file side channel: the shared directory " +
                  (parent.empty() ? std::string("/") : parent) +
                  " does not exist (create it on a filesystem every rank "
                  "mounts)",
              {.rank = rank_, .address = dir_});
      }
      fail("cannot create the job directory", err);
    }
  }

  std::vector<std::string> list_names() {
    DIR* d = ::opendir(dir_.c_str());
    if (d == nullptr) {
      if (errno == ENOENT) {
        return {};  // removed by a clean-up; put() recreates it
      }
      fail("cannot list the job directory", errno);
    }
    std::vector<std::string> names;
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] == '.') {
        continue;  // ".", "..", temporaries
      }
      names.emplace_back(e->d_name);
    }
    ::closedir(d);
    std::sort(names.begin(), names.end());
    return names;
  }

  std::optional<std::string> read_file(const std::string& p) const {
    int fd = ::open(p.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      if (errno == ENOENT) {
        return std::nullopt;  // removed between listing and open
      }
      fail("cannot open " + p, errno);
    }
    std::string out;
    char buf[65536];
    while (true) {
      ssize_t r = ::read(fd, buf, sizeof(buf));
      if (r < 0 && errno == EINTR)
        continue;
      if (r < 0) {
        int err = errno;
        ::close(fd);
        fail("cannot read " + p, err);
      }
      if (r == 0)
        break;
      out.append(buf, static_cast<size_t>(r));
    }
    ::close(fd);
    return out;
  }

  std::string dir_;
  std::string where_;
  int rank_;
};

}  // namespace

std::shared_ptr<RendezvousStore> make_file_store(const std::string& dir,
                                                 const std::string& job,
                                                 int rank) {
  if (dir.empty() || dir[0] != '/') {
    raise(ErrorKind::Config,
          "file side channel: the shared directory must be an absolute path, "
          "got '" +
              dir + "'",
          {.rank = rank, .address = dir});
  }
  if (job.empty() || job[0] == '.' || job.find('/') != std::string::npos) {
    raise(ErrorKind::Config,
          "file side channel: invalid job id '" + job +
              "' (it names a subdirectory: no '/', no leading '.')",
          {.rank = rank, .address = dir});
  }
  std::string base = dir;
  while (base.size() > 1 && base.back() == '/') {
    base.pop_back();
  }
  return std::make_shared<FileStore>(
      (base == "/" ? std::string() : base) + "/" + job, rank);
}

AllGatherFn make_file_channel(const FileChannelOptions& o) {
  return make_store_all_gather(make_file_store(o.dir, o.job, o.rank), o.rank,
                               o.size, o.timeout, "file side channel");
}

}  // namespace jaccl::detail
