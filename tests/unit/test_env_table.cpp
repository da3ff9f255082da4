// Copyright 2026 the jaccl authors.
// The README's environment table and the code's table must agree: every
// variable jaccl reads is documented with its MLX_* alias and default.
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <sstream>
#include <string>

#include "common/env.h"

namespace {

std::string readme() {
  std::ifstream f(std::string(JACCL_SOURCE_DIR) + "/README.md");
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The README row of a variable: the line of the table that starts with it.
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

TEST(EnvTable, EveryVariableIsDocumentedInTheReadme) {
  std::string text = readme();
  ASSERT_FALSE(text.empty()) << "README.md not found";
  for (const auto& v : jaccl::detail::env_table()) {
    std::string row = row_of(text, v.name);
    ASSERT_FALSE(row.empty()) << v.name << " has no row in README.md";
    if (v.alias != nullptr) {
      EXPECT_NE(row.find(v.alias), std::string::npos)
          << v.name << ": README row does not name the alias " << v.alias;
    }
    EXPECT_NE(row.find(v.def), std::string::npos)
        << v.name << ": README row does not give the default '" << v.def << "'";
  }
}

TEST(EnvTable, ReadmeDocumentsNoUnknownVariable) {
  std::set<std::string> known;
  for (const auto& v : jaccl::detail::env_table()) {
    known.insert(v.name);
  }
  std::istringstream in(readme());
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("| `JACCL_", 0) == 0) {
      auto end = line.find('`', 3);
      std::string name = line.substr(3, end - 3);
      EXPECT_TRUE(known.count(name))
          << "README documents " << name << " but the code does not read it";
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
