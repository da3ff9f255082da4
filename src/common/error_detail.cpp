// Copyright 2026 the jaccl authors.
#include "common/error_detail.h"

#include <cctype>
#include <unordered_map>

namespace jaccl::detail {

namespace {

constexpr size_t kMaxIndices = size_t(1) << 20;  // a hostile "{0-4000000000}"

// "0-3,5" -> {0, 1, 2, 3, 5}; false unless every index is below n.
bool parse_indices(std::string_view s, size_t n, std::vector<size_t>* out) {
  out->clear();
  if (s.empty()) {
    return false;
  }
  size_t i = 0;
  auto number = [&](size_t* v) {
    if (i >= s.size() || !std::isdigit(static_cast<unsigned char>(s[i]))) {
      return false;
    }
    size_t x = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
      x = x * 10 + static_cast<size_t>(s[i] - '0');
      if (x >= n) {
        return false;
      }
      ++i;
    }
    *v = x;
    return true;
  };
  for (;;) {
    size_t a = 0, b = 0;
    if (!number(&a)) {
      return false;
    }
    b = a;
    if (i < s.size() && s[i] == '-') {
      ++i;
      if (!number(&b) || b < a) {
        return false;
      }
    }
    if (out->size() + (b - a + 1) > kMaxIndices) {
      return false;
    }
    for (size_t x = a; x <= b; ++x) {
      out->push_back(x);
    }
    if (i == s.size()) {
      return true;
    }
    if (s[i] != ',') {
      return false;
    }
    ++i;
  }
}

// "3,-1,5" -> {3, -1, 5}.
bool parse_values(std::string_view s, std::vector<int>* out) {
  out->clear();
  size_t i = 0;
  while (i < s.size() && out->size() < kMaxIndices) {
    const bool neg = s[i] == '-';
    i += neg ? 1 : 0;
    long v = 0;
    const size_t start = i;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])) &&
           i - start < 10) {
      v = v * 10 + (s[i] - '0');
      ++i;
    }
    if (i == start || v > 0x7fffffffL) {
      return false;
    }
    out->push_back(static_cast<int>(neg ? -v : v));
    if (i == s.size()) {
      return true;
    }
    if (s[i++] != ',') {
      return false;
    }
  }
  return false;
}

// "{0-3,5}": runs of three or more as ranges.
std::string encode_indices(const std::vector<size_t>& idx) {
  std::string out = "{";
  for (size_t i = 0; i < idx.size();) {
    size_t j = i;
    while (j + 1 < idx.size() && idx[j + 1] == idx[j] + 1) {
      ++j;
    }
    out += (i ? "," : "") + std::to_string(idx[i]);
    if (j >= i + 2) {
      out += "-" + std::to_string(idx[j]);
      i = j + 1;
    } else {
      ++i;
    }
  }
  return out + "}";
}

// Calls text(unescaped piece) and ranks(indices) for the template's parts in
// order; a malformed placeholder is text.
template <class T, class R>
void walk(std::string_view t, size_t n, T&& text, R&& ranks) {
  std::string buf;
  std::vector<size_t> idx;
  size_t i = 0;
  while (i < t.size()) {
    const char c = t[i];
    if ((c == '{' || c == '}') && i + 1 < t.size() && t[i + 1] == c) {
      buf += c;
      i += 2;
      continue;
    }
    if (c == '{') {
      const size_t end = t.find('}', i);
      if (end != std::string_view::npos &&
          parse_indices(t.substr(i + 1, end - i - 1), n, &idx)) {
        if (!buf.empty()) {
          text(std::string_view(buf));
          buf.clear();
        }
        ranks(idx);
        i = end + 1;
        continue;
      }
    }
    buf += c;
    ++i;
  }
  if (!buf.empty()) {
    text(std::string_view(buf));
  }
}

bool word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

}  // namespace

// The building steps the public operations share.
struct DetailAccess {
  static void text(Detail& d, std::string_view s) {
    d.tmpl_ += escape_detail(s);
  }
  static std::vector<size_t> add(Detail& d, const std::vector<int>& values) {
    std::unordered_map<int, size_t> at;
    for (size_t i = 0; i < d.ranks_.size(); ++i) {
      at.emplace(d.ranks_[i], i);
    }
    std::vector<size_t> idx;
    idx.reserve(values.size());
    for (int v : values) {
      auto [it, added] = at.emplace(v, d.ranks_.size());
      if (added) {
        d.ranks_.push_back(v);
      }
      idx.push_back(it->second);
    }
    return idx;
  }
  static void ranks(Detail& d, const std::vector<int>& values) {
    if (!values.empty()) {
      d.tmpl_ += encode_indices(add(d, values));
    }
  }
  static std::vector<int> values(const Detail& d,
                                 const std::vector<size_t>& idx) {
    std::vector<int> v;
    v.reserve(idx.size());
    for (size_t i : idx) {
      v.push_back(d.ranks_[i]);
    }
    return v;
  }
  // d's parts, handed to text(piece) and ranks(values).
  template <class T, class R>
  static void parts(const Detail& d, T&& text, R&& ranks) {
    walk(d.tmpl_, d.ranks_.size(), text,
         [&](const std::vector<size_t>& idx) { ranks(values(d, idx)); });
  }
};

Detail::Detail(std::string_view text) : tmpl_(escape_detail(text)) {}

Detail Detail::from_template(std::string_view tmpl, std::vector<int> ranks) {
  Detail d;
  d.tmpl_ = tmpl;
  d.ranks_ = std::move(ranks);
  return d;
}

Detail& Detail::operator+=(const Detail& more) {
  if (&more == this) {
    const Detail copy = more;
    return *this += copy;
  }
  DetailAccess::add(*this, more.ranks_);  // keeps more's order of mention
  DetailAccess::parts(
      more, [&](std::string_view s) { DetailAccess::text(*this, s); },
      [&](const std::vector<int>& v) { DetailAccess::ranks(*this, v); });
  return *this;
}

void Detail::mention(int rank) {
  DetailAccess::add(*this, {rank});
}

Detail Detail::replaced(std::string_view phrase, const Detail& with) const {
  if (phrase.empty()) {
    return *this;
  }
  Detail out;
  out.ranks_ = ranks_;
  DetailAccess::parts(
      *this,
      [&](std::string_view s) {
        size_t from = 0;
        for (size_t at = s.find(phrase); at != std::string_view::npos;
             at = s.find(phrase, at + 1)) {
          const size_t end = at + phrase.size();
          if ((at > 0 && word_char(s[at - 1])) ||
              (end < s.size() && word_char(s[end]))) {
            continue;
          }
          DetailAccess::text(out, s.substr(from, at - from));
          out += with;
          from = end;
          at = end - 1;
        }
        DetailAccess::text(out, s.substr(from));
      },
      [&](const std::vector<int>& v) { DetailAccess::ranks(out, v); });
  return out;
}

std::string Detail::to_wire() const {
  std::string out;
  DetailAccess::parts(
      *this, [&](std::string_view s) { out += escape_detail(s); },
      [&](const std::vector<int>& v) {
        out += "{=";
        for (size_t i = 0; i < v.size(); ++i) {
          out += (i ? "," : "") + std::to_string(v[i]);
        }
        out += "}";
      });
  return out;
}

Detail Detail::from_wire(std::string_view wire) {
  // The numbers become the ranks of a template the walk can read.
  Detail d;
  std::string tmpl;
  for (size_t i = 0; i < wire.size();) {
    if (wire.compare(i, 2, "{{") == 0 || wire.compare(i, 2, "}}") == 0) {
      tmpl.append(wire.substr(i, 2));
      i += 2;
      continue;
    }
    std::vector<int> values;
    const size_t end = wire.find('}', i);
    if (wire.compare(i, 2, "{=") == 0 && end != std::string_view::npos &&
        parse_values(wire.substr(i + 2, end - i - 2), &values)) {
      tmpl += encode_indices(DetailAccess::add(d, values));
      i = end + 1;
      continue;
    }
    tmpl += escape_detail(wire.substr(i, 1));
    ++i;
  }
  d.tmpl_ = std::move(tmpl);
  return d;
}

std::string Detail::str() const {
  return render_detail(tmpl_, ranks_);
}

Detail rank_ref(int rank) {
  return "rank " + rank_num(rank);
}

Detail ranks_ref(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_nums(ranks);
}

Detail rank_num(int rank) {
  return rank_nums({rank});
}

Detail rank_nums(const std::vector<int>& ranks) {
  Detail d;
  DetailAccess::ranks(d, ranks);
  return d;
}

std::string render_detail(std::string_view tmpl,
                          const std::vector<int>& ranks) {
  std::string out;
  walk(
      tmpl, ranks.size(), [&](std::string_view s) { out += s; },
      [&](const std::vector<size_t>& idx) {
        std::vector<int> v;
        v.reserve(idx.size());
        for (size_t i : idx) {
          v.push_back(ranks[i]);
        }
        out += rank_list(v);
      });
  return out;
}

std::string escape_detail(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    out += c;
    if (c == '{' || c == '}') {
      out += c;
    }
  }
  return out;
}

std::string rank_list(const std::vector<int>& ranks) {
  constexpr size_t kShown = 16;
  std::string out;
  for (size_t i = 0; i < ranks.size() && i < kShown; ++i) {
    out += (i ? ", " : "") + std::to_string(ranks[i]);
  }
  if (ranks.size() > kShown) {
    out += " and " + std::to_string(ranks.size() - kShown) + " more";
  }
  return out;
}

std::string ranks_phrase(const std::vector<int>& ranks) {
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

}  // namespace jaccl::detail
