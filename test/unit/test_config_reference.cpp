// docs/configuration.md, the configuration reference, against the key table (Config::keys()):
// every key has one row whose type, default and valid values are the code's, and no row names an
// unknown key. A new key, a changed default or range fails this test until the reference says so.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "kgroup/config.hpp"

#ifndef KGROUP_SOURCE_DIR
#error "KGROUP_SOURCE_DIR must name the source tree (test/CMakeLists.txt defines it)"
#endif

namespace {

std::string read_configuration_reference() {
  // Not string + "/docs/configuration.md": gcc 12 warns (-Warray-bounds, a false positive) on
  // that at -O2 for a source directory path of some lengths.
  const std::string path = KGROUP_SOURCE_DIR "/docs/configuration.md";
  std::ifstream in(path, std::ios::binary);
  REQUIRE(in.good());
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The page's text after its "# <title>" line, which must be the first line; empty if it is not.
// The whole page is the reference: its "## " sections group the keys.
std::string page_body(const std::string& text, const std::string& title) {
  const std::string head = "# " + title + "\n";
  if (text.rfind(head, 0) != 0) return {};
  return text.substr(head.size());
}

std::string trim(std::string s) {
  const auto b = s.find_first_not_of(' ');
  const auto e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

std::string without_backticks(std::string s) {
  std::erase(s, '`');
  return s;
}

// Table rows whose first cell is a `key`: key -> cells (backticks removed), in order.
std::multimap<std::string, std::vector<std::string>> key_rows(const std::string& sec) {
  std::multimap<std::string, std::vector<std::string>> rows;
  std::istringstream lines(sec);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    std::vector<std::string> cells;
    std::size_t start = 1;
    for (std::size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1) {
      cells.push_back(without_backticks(trim(line.substr(start, bar - start))));
    }
    if (!cells.empty()) rows.emplace(cells[0], cells);
  }
  return rows;
}

// How the reference writes a key's valid values: the range as the error message prints it, or the
// allowed values.
std::string valid_values(const kgroup::ConfigKey& k) {
  if (k.type == "int" || k.type == "long") return fmt::format("[{}, {}]", k.min, k.max);
  if (k.type == "bool") return "true, false";
  if (k.type == "enum") {
    std::string out(k.allowed);
    for (std::size_t p = 0; (p = out.find(',', p)) != std::string::npos; p += 2) out.replace(p, 1, ", ");
    return out;
  }
  return {};  // strings and lists: free text
}

}  // namespace

TEST_CASE("docs/configuration.md lists every key with the code's type, default and range", "[docs]") {
  const std::string body = page_body(read_configuration_reference(), "Configuration reference");
  REQUIRE_FALSE(body.empty());
  const auto rows = key_rows(body);
  // Columns: key | type | default | valid values | meaning.
  for (const auto& k : kgroup::Config::keys()) {
    const std::string name(k.name);
    INFO("key " << name);
    CHECK(rows.count(name) == 1);
    if (rows.count(name) == 0) continue;
    const auto& cells = rows.find(name)->second;
    CHECK(cells.size() == 5);
    if (cells.size() != 5) continue;
    CHECK(cells[1] == k.type);
    if (k.default_value.empty()) {
      CHECK((cells[2] == "(empty)" || cells[2] == "(required)"));
    } else {
      CHECK(cells[2] == k.default_value);
    }
    const std::string values = valid_values(k);
    if (!values.empty()) CHECK(cells[3] == values);
    CHECK_FALSE(cells[4].empty());
  }
  for (const auto& [name, cells] : rows) {
    INFO("docs/configuration.md row " << name);
    const bool known = std::any_of(kgroup::Config::keys().begin(), kgroup::Config::keys().end(),
                                   [&](const kgroup::ConfigKey& k) { return k.name == name; });
    CHECK(known);
  }
}
