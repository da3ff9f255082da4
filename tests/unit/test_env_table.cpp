// Copyright 2026 the jaccl authors.
// The environment reference (docs/environment.md) and the code's table must
// agree: every variable jaccl reads is documented with its MLX_* alias and
// default, and no JACCL_* name in the sources escapes the table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include "common/env.h"

namespace {

const char* const kReference = "docs/environment.md";

std::string slurp(const std::filesystem::path& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string reference() {
  return slurp(std::filesystem::path(JACCL_SOURCE_DIR) / kReference);
}

// The reference's row of a variable: the line of the table that starts with it.
std::string row_of(const std::string& text, const std::string& name) {
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `" + name + "`", 0) == 0) {
      return line;
    }
  }
  return "";
}

TEST(EnvTable, EveryVariableIsDocumentedInTheReference) {
  std::string text = reference();
  ASSERT_FALSE(text.empty()) << kReference << " not found";
  for (const auto& v : jaccl::detail::env_table()) {
    std::string row = row_of(text, v.name);
    ASSERT_FALSE(row.empty()) << v.name << " has no row in " << kReference;
    if (v.alias != nullptr) {
      EXPECT_NE(row.find(v.alias), std::string::npos)
          << v.name << ": " << kReference << " row does not name the alias "
          << v.alias;
    }
    EXPECT_NE(row.find(v.def), std::string::npos)
        << v.name << ": " << kReference << " row does not give the default '"
        << v.def << "'";
  }
}

// A variable read with getenv beside the table (or named in a message as if
// it existed) would escape the test above: every JACCL_* name inside a string
// literal of the library, tools and bindings must be in the table. Build
// macros (JACCL_HAVE_*) are not in string literals, so they do not count.
TEST(EnvTable, EveryJacclNameInTheSourcesIsInTheTable) {
  std::set<std::string> known;
  for (const auto& v : jaccl::detail::env_table()) {
    known.insert(v.name);
  }
  const std::regex literal(R"re("(?:[^"\\\n]|\\.)*")re");
  const std::regex name(R"(JACCL_[A-Z0-9_]+)");
  namespace fs = std::filesystem;
  int files = 0;
  for (const char* dir : {"src", "include", "tools", "python", "torch"}) {
    for (const auto& e :
         fs::recursive_directory_iterator(fs::path(JACCL_SOURCE_DIR) / dir)) {
      auto ext = e.path().extension();
      if (!e.is_regular_file() || (ext != ".cpp" && ext != ".h")) {
        continue;
      }
      ++files;
      std::string text = slurp(e.path());
      for (std::sregex_iterator s(text.begin(), text.end(), literal), end;
           s != end; ++s) {
        std::string lit = s->str();
        for (std::sregex_iterator n(lit.begin(), lit.end(), name); n != end;
             ++n) {
          EXPECT_TRUE(known.count(n->str()))
              << e.path().string() << " names " << n->str()
              << " in a string, but the environment table (src/common/env.cpp, "
              << kReference << ") does not list it";
        }
      }
    }
  }
  EXPECT_GT(files, 50) << "the sources were not found under "
                       << JACCL_SOURCE_DIR;
}

TEST(EnvTable, ReferenceDocumentsNoUnknownVariable) {
  std::set<std::string> known;
  for (const auto& v : jaccl::detail::env_table()) {
    known.insert(v.name);
  }
  std::istringstream in(reference());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `JACCL_", 0) == 0) {
      auto end = line.find('`', 3);
      std::string name = line.substr(3, end - 3);
      EXPECT_TRUE(known.count(name)) << kReference << " documents " << name
                                     << " but the code does not read it";
    }
  }
}

TEST(EnvTable, JacclSpellingWinsOverMlx) {
  ::setenv("MLX_RANK", "5", 1);
  ::setenv("JACCL_RANK", "2", 1);
  EXPECT_STREQ(jaccl::detail::env_get(jaccl::detail::EnvVar::Rank), "2");
  EXPECT_STREQ(jaccl::detail::env_source_name(jaccl::detail::EnvVar::Rank),
               "JACCL_RANK");
  ::unsetenv("JACCL_RANK");
  EXPECT_STREQ(jaccl::detail::env_get(jaccl::detail::EnvVar::Rank), "5");
  ::unsetenv("MLX_RANK");
  EXPECT_EQ(jaccl::detail::env_get(jaccl::detail::EnvVar::Rank), nullptr);
}

}  // namespace
