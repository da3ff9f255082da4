// Copyright 2026 the jaccl authors.
// The detail of an error message with the ranks it names kept apart from its
// words, so that a split child turns member numbers into job ranks by
// mapping numbers, never by reading text. Throw sites build one with + :
//   raise(ErrorKind::Timeout, "timed out waiting for " + ranks_ref(missing),
//         {.rank = me});
// Plain text is always text (its braces too); only rank_ref and friends
// name ranks.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace jaccl::detail {

class Detail {
 public:
  Detail() = default;
  // Literal text.
  Detail(const char* text) : Detail(std::string_view(text)) {}
  Detail(const std::string& text) : Detail(std::string_view(text)) {}
  Detail(std::string_view text);

  // A template and the ranks its placeholders index (ErrorInfo::detail and
  // ErrorInfo::peers). A malformed placeholder reads as text.
  static Detail from_template(std::string_view tmpl, std::vector<int> ranks);

  Detail& operator+=(const Detail& more);
  friend Detail operator+(Detail a, const Detail& b) {
    a += b;
    return a;
  }

  // Adds rank to ranks() without naming it in the text (the peer of an
  // error's note).
  void mention(int rank);
  // Every whole-word `phrase` of the text (not of a placeholder) replaced by
  // `with`.
  Detail replaced(std::string_view phrase, const Detail& with) const;
  // The same detail with every rank r mapped to map(r).
  template <class F>
  Detail mapped(F map) const {
    Detail d = *this;
    for (int& r : d.ranks_) {
      r = map(r);
    }
    return d;
  }

  // One self-contained string for a text channel (a handshake verdict, a
  // frame): the ranks travel as numbers in "{=3}" or "{=2,5}", never as
  // words; from_wire reads it back.
  std::string to_wire() const;
  static Detail from_wire(std::string_view wire);

  bool empty() const { return tmpl_.empty(); }
  const std::string& pattern() const { return tmpl_; }
  const std::vector<int>& ranks() const { return ranks_; }
  // The text with the ranks filled in.
  std::string str() const;

 private:
  friend struct DetailAccess;
  std::string tmpl_;
  std::vector<int> ranks_;  // distinct, in order of first mention
};

// "rank 3".
Detail rank_ref(int rank);
// "rank 3" or "ranks 2, 5, 7" (at most 16 listed, "... and 4 more").
Detail ranks_ref(const std::vector<int>& ranks);
// "3", for wordings of their own ("rank 3's op").
Detail rank_num(int rank);
// "2, 5, 7" (at most 16 listed, "... and 4 more").
Detail rank_nums(const std::vector<int>& ranks);

// The text of a template with its ranks filled in.
std::string render_detail(std::string_view tmpl, const std::vector<int>& ranks);
// text with its braces doubled: a template that reads as text.
std::string escape_detail(std::string_view text);

// "2, 5, 7": ranks for a message, at most 16 listed ("... and 4 more").
std::string rank_list(const std::vector<int>& ranks);
// "rank 3" or "ranks 2, 5, 7". For logs; error messages use ranks_ref.
std::string ranks_phrase(const std::vector<int>& ranks);

}  // namespace jaccl::detail
