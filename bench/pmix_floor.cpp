// Copyright 2026 the jaccl authors.
// pmix_floor: the least a PMIx bootstrap costs under this launcher, for the
// pmix:// bootstrap benchmark. PMIx_Init, the job size, then --rounds rounds
// of what pmix:// does per side-channel call (put 256 bytes, commit, fence
// with PMIX_COLLECT_DATA, get every rank's value), PMIx_Finalize; no jaccl.
// Rank 0 prints one JSON line: PMIx_Init's time and the median round's.
#include <pmix.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
}

int fail(const char* what, pmix_status_t st) {
  std::fprintf(stderr, "pmix_floor: %s failed: %s\n", what,
               PMIx_Error_string(st));
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc) {
      rounds = std::max(0, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: pmix_floor [--rounds N]\n");
      return 2;
    }
  }
  const auto t0 = Clock::now();
  pmix_proc_t me;
  PMIX_PROC_CONSTRUCT(&me);
  pmix_status_t st = PMIx_Init(&me, nullptr, 0);
  if (st != PMIX_SUCCESS) {
    return fail("PMIx_Init", st);
  }
  const double init_ms = ms_since(t0);
  pmix_proc_t wild;
  PMIX_PROC_CONSTRUCT(&wild);
  PMIX_LOAD_PROCID(&wild, me.nspace, PMIX_RANK_WILDCARD);
  pmix_value_t* val = nullptr;
  st = PMIx_Get(&wild, PMIX_JOB_SIZE, nullptr, 0, &val);
  if (st != PMIX_SUCCESS || val == nullptr) {
    return fail("PMIx_Get(PMIX_JOB_SIZE)", st);
  }
  const uint32_t size = val->data.uint32;
  PMIX_VALUE_RELEASE(val);
  std::vector<double> round_ms;
  for (int k = 0; k < rounds; ++k) {
    const auto tr = Clock::now();
    const std::string key = "floor." + std::to_string(k);
    std::vector<char> buf(256, static_cast<char>(me.rank));
    pmix_value_t v;
    PMIX_VALUE_CONSTRUCT(&v);
    v.type = PMIX_BYTE_OBJECT;
    v.data.bo.bytes = buf.data();
    v.data.bo.size = buf.size();
    if ((st = PMIx_Put(PMIX_GLOBAL, key.c_str(), &v)) != PMIX_SUCCESS) {
      return fail("PMIx_Put", st);
    }
    if ((st = PMIx_Commit()) != PMIX_SUCCESS) {
      return fail("PMIx_Commit", st);
    }
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    bool collect = true;
    PMIX_INFO_LOAD(&info, PMIX_COLLECT_DATA, &collect, PMIX_BOOL);
    st = PMIx_Fence(&wild, 1, &info, 1);
    PMIX_INFO_DESTRUCT(&info);
    if (st != PMIX_SUCCESS) {
      return fail("PMIx_Fence", st);
    }
    for (uint32_t r = 0; r < size; ++r) {
      pmix_proc_t p;
      PMIX_PROC_CONSTRUCT(&p);
      PMIX_LOAD_PROCID(&p, me.nspace, r);
      pmix_value_t* got = nullptr;
      if ((st = PMIx_Get(&p, key.c_str(), nullptr, 0, &got)) != PMIX_SUCCESS) {
        return fail("PMIx_Get", st);
      }
      PMIX_VALUE_RELEASE(got);
    }
    round_ms.push_back(ms_since(tr));
  }
  PMIx_Finalize(nullptr, 0);
  if (me.rank == 0) {
    std::sort(round_ms.begin(), round_ms.end());
    const double med = round_ms.empty() ? 0 : round_ms[round_ms.size() / 2];
    std::printf("{\"ranks\":%u,\"pmix_init_ms\":%.3f,\"round_ms\":%.3f}\n",
                size, init_ms, med);
  }
  return 0;
}
