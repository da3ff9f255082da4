// Copyright 2026 the jaccl authors.
#include "transport/agreement.h"

#include <algorithm>

#include "common/bytes.h"

namespace jaccl::detail {

namespace {

// A decision's wire form: epoch u64, ok u8, failed[size], exclude[size].
void put_decision(std::string& out, const AgreeDecision& d, size_t size) {
  uint8_t head[9];
  put_u64(head, d.epoch);
  head[8] = d.ok ? 1 : 0;
  out.append(reinterpret_cast<const char*>(head), sizeof(head));
  for (const RankSet* s : {&d.failed, &d.exclude}) {
    for (size_t r = 0; r < size; ++r) {
      out.push_back(r < s->size() && (*s)[r] ? 1 : 0);
    }
  }
}

bool get_decision(std::string_view& in, AgreeDecision& d, size_t size) {
  if (in.size() < 9 + 2 * size) {
    return false;
  }
  const auto* p = reinterpret_cast<const uint8_t*>(in.data());
  d.epoch = get_u64(p);
  d.ok = p[8] != 0;
  d.failed.assign(in.data() + 9, in.data() + 9 + size);
  d.exclude.assign(in.data() + 9 + size, in.data() + 9 + 2 * size);
  in.remove_prefix(9 + 2 * size);
  return true;
}

}  // namespace

std::vector<int> ranks_in(const RankSet& s) {
  std::vector<int> out;
  for (size_t r = 0; r < s.size(); ++r) {
    if (s[r]) {
      out.push_back(static_cast<int>(r));
    }
  }
  return out;
}

std::string encode_vote(const AgreeVote& v) {
  std::string out;
  const size_t n = v.failed.size();
  put_decision(out, AgreeDecision{v.epoch, v.failed, v.exclude, v.ok}, n);
  put_decision(out, v.last, n);
  return out;
}

std::optional<AgreeVote> decode_vote(std::string_view body, int size) {
  AgreeDecision now, last;
  const auto n = static_cast<size_t>(size);
  if (!get_decision(body, now, n) || !get_decision(body, last, n) ||
      !body.empty()) {
    return std::nullopt;
  }
  return AgreeVote{now.epoch, std::move(now.failed), std::move(now.exclude),
                   now.ok, std::move(last)};
}

std::string encode_decision(const AgreeDecision& d) {
  std::string out;
  put_decision(out, d, d.failed.size());
  return out;
}

std::optional<AgreeDecision> decode_decision(std::string_view body, int size) {
  AgreeDecision d;
  if (!get_decision(body, d, static_cast<size_t>(size)) || !body.empty() ||
      d.epoch == 0) {
    return std::nullopt;
  }
  return d;
}

Agreement::Agreement(int rank, int size)
    : rank_(rank), size_(size), exclude_(static_cast<size_t>(size), 0) {}

uint64_t Agreement::begin(RankSet exclude, bool ok) {
  exclude.resize(static_cast<size_t>(size_), 0);
  exclude_ = std::move(exclude);
  ok_ = ok;
  voted_to_ = -1;
  ++epoch_;
  // A decision that arrived before the caller got here (a member left out
  // is not waited for) answers at once.
  pending_ = decisions_.count(epoch_) != 0 ? 0 : epoch_;
  return epoch_;
}

const AgreeDecision* Agreement::decision(uint64_t e) const {
  auto it = decisions_.find(e);
  return it == decisions_.end() ? nullptr : &it->second;
}

void Agreement::on_vote(int from, AgreeVote v) {
  votes_[from] = std::move(v);
}

bool Agreement::on_decision(const AgreeDecision& d, int from) {
  if (decisions_.count(d.epoch) != 0) {
    return false;
  }
  decisions_[d.epoch] = d;
  if (from >= 0 && from < size_ && from != rank_) {
    held_[d.epoch] = from;
  } else {
    to_forward_.push_back(d);
  }
  if (pending_ == d.epoch) {
    pending_ = 0;
  }
  return true;
}

const AgreeDecision* Agreement::last() const {
  return decisions_.empty() ? nullptr : &decisions_.rbegin()->second;
}

int Agreement::held_from(uint64_t e) const {
  auto it = held_.find(e);
  return it == held_.end() ? -1 : it->second;
}

int Agreement::coordinator(const RankSet& gone) const {
  for (int r = 0; r < size_; ++r) {
    const auto u = static_cast<size_t>(r);
    if (!gone[u] && !exclude_[u]) {
      return r;
    }
  }
  return rank_;
}

void Agreement::decide(AgreeDecision d) {
  decisions_[d.epoch] = d;
  to_forward_.push_back(std::move(d));
  pending_ = 0;
}

std::vector<Agreement::Send> Agreement::poll(const RankSet& gone) {
  std::vector<Send> out;
  if (pending_ != 0) {
    const int c = coordinator(gone);
    if (c != rank_ && c != voted_to_) {
      AgreeVote v{pending_, gone, exclude_, ok_, {}};
      if (!decisions_.empty()) {
        v.last = decisions_.rbegin()->second;
      }
      out.push_back({c, false, std::move(v), {}});
      voted_to_ = c;
    } else if (c == rank_) {
      // Every exclusion asked for this epoch, then every live voter's.
      RankSet exclude = exclude_;
      for (const auto& [r, v] : votes_) {
        if (v.epoch == pending_) {
          for (size_t q = 0; q < exclude.size() && q < v.exclude.size(); ++q) {
            exclude[q] = exclude[q] || v.exclude[q];
          }
        }
      }
      bool all = true, ok = ok_;
      const AgreeDecision* adopt = nullptr;
      for (int r = 0; r < size_ && adopt == nullptr; ++r) {
        const auto u = static_cast<size_t>(r);
        if (r == rank_ || gone[u] || exclude[u]) {
          continue;
        }
        auto it = votes_.find(r);
        if (it == votes_.end()) {
          all = false;
        } else if (it->second.last.epoch == pending_) {
          adopt = &it->second.last;
        } else if (it->second.epoch == pending_) {
          ok = ok && it->second.ok;
        } else {
          all = false;
        }
      }
      if (adopt != nullptr) {
        decide(*adopt);
      } else if (all) {
        decide(AgreeDecision{pending_, gone, exclude, ok});
      }
    }
  }
  // A decision whose sender is gone may not have reached everyone.
  for (auto it = held_.begin(); it != held_.end();) {
    if (gone[static_cast<size_t>(it->second)]) {
      to_forward_.push_back(decisions_.at(it->first));
      it = held_.erase(it);
    } else {
      ++it;
    }
  }
  for (const AgreeDecision& d : to_forward_) {
    for (int r = 0; r < size_; ++r) {
      if (r != rank_ && !gone[static_cast<size_t>(r)]) {
        out.push_back({r, true, {}, d});
        answered_[r] = std::max(answered_[r], d.epoch);
      }
    }
  }
  to_forward_.clear();
  // A voter behind: it waits for a decision this member holds.
  for (const auto& [r, v] : votes_) {
    auto d = decisions_.find(v.epoch);
    auto& answered = answered_[r];
    if (d != decisions_.end() && answered < v.epoch &&
        !gone[static_cast<size_t>(r)]) {
      out.push_back({r, true, {}, d->second});
      answered = v.epoch;
    }
  }
  return out;
}

std::vector<int> Agreement::waiting_for(const RankSet& gone) const {
  std::vector<int> out;
  if (pending_ == 0) {
    return out;
  }
  const int c = coordinator(gone);
  if (c != rank_) {
    return {c};
  }
  for (int r = 0; r < size_; ++r) {
    const auto u = static_cast<size_t>(r);
    if (r == rank_ || gone[u] || exclude_[u]) {
      continue;
    }
    auto it = votes_.find(r);
    if (it == votes_.end() ||
        (it->second.epoch != pending_ && it->second.last.epoch != pending_)) {
      out.push_back(r);
    }
  }
  return out;
}

}  // namespace jaccl::detail
