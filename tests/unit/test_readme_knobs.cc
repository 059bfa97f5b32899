// The README's knob table and the parser's own table (common/knobs.h, through knobTable()) list
// the same variables, with the same default and unit: users set these variables from the README
// alone. The parser reads exactly the variables of its table.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/config.h"

namespace {

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t") - begin + 1);
}

std::vector<std::string> cellsOf(const std::string& row) {
  std::vector<std::string> cells;
  size_t start = row.find('|') + 1;
  for (size_t bar = row.find('|', start); bar != std::string::npos; bar = row.find('|', start)) {
    cells.push_back(trim(row.substr(start, bar - start)));
    start = bar + 1;
  }
  return cells;
}

// The rows of the README's knob table (the table whose header is "| variable | default | unit |
// meaning |"), as variable -> cells; every variable seen, duplicates included, in `order`.
std::map<std::string, std::vector<std::string>> readmeKnobRows(std::vector<std::string>* order) {
  std::ifstream in(NCCL_LAMPORT_README);
  std::map<std::string, std::vector<std::string>> rows;
  std::string line;
  bool inTable = false;
  while (std::getline(in, line)) {
    if (!inTable) {
      inTable = line.rfind("| variable | default | unit | meaning |", 0) == 0;
      continue;
    }
    if (line.rfind("|---", 0) == 0) continue;
    if (line.rfind("|", 0) != 0) break;  // the table ends at its first non-row line
    std::vector<std::string> cells = cellsOf(line);
    if (cells.empty()) continue;
    std::string variable = cells[0];
    if (variable.size() >= 2 && variable.front() == '`' && variable.back() == '`') {
      variable = variable.substr(1, variable.size() - 2);
    }
    order->push_back(variable);
    rows[variable] = cells;
  }
  return rows;
}

TEST(ReadmeKnobs, TheReadmeTableListsExactlyTheParsersKnobs) {
  std::vector<std::string> order;
  const auto rows = readmeKnobRows(&order);
  ASSERT_FALSE(rows.empty()) << NCCL_LAMPORT_README << ": no knob table (header \"| variable | default | unit | meaning |\")";
  std::set<std::string> known;
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) {
    known.insert(knob.variable);
    EXPECT_EQ(rows.count(knob.variable), 1u)
        << knob.variable << " is missing from the README's knob table; a row from common/knobs.h:\n| `"
        << knob.variable << "` | `" << knob.defaultText << "` | " << knob.unit << " | " << knob.doc << " |";
  }
  for (const std::string& variable : order) {
    EXPECT_EQ(known.count(variable), 1u) << variable << " is in the README's knob table but the parser does not know it";
  }
  EXPECT_EQ(order.size(), rows.size()) << "a variable is listed twice in the README's knob table";
}

TEST(ReadmeKnobs, EveryRowGivesTheParsersDefaultAndUnit) {
  std::vector<std::string> order;
  const auto rows = readmeKnobRows(&order);
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) {
    auto row = rows.find(knob.variable);
    if (row == rows.end()) continue;  // reported by the test above
    ASSERT_GE(row->second.size(), 4u) << knob.variable << ": a row has four cells";
    const std::string& defaultCell = row->second[1];
    const std::string quoted = std::string("`") + knob.defaultText + "`";
    const bool matches = defaultCell.rfind(quoted, 0) == 0 ||
                         (std::string(knob.defaultText) == "unset" && defaultCell.rfind("unset", 0) == 0);
    EXPECT_TRUE(matches) << knob.variable << ": the README's default cell \"" << defaultCell
                         << "\" does not start with the parser's default " << quoted;
    EXPECT_EQ(row->second[2].rfind(knob.unit, 0), 0u)
        << knob.variable << ": the README's unit cell \"" << row->second[2] << "\" is not " << knob.unit;
  }
}

// A knob whose parser rejects small values or clamps large ones says so in its unit cell ("1 to
// 2592000000", "1 or more"): a user who sets 0 should learn from the README that it is refused
// (WARN, default kept), not from the log.
TEST(ReadmeKnobs, EveryBoundedRowGivesTheParsersLimits) {
  std::vector<std::string> order;
  const auto rows = readmeKnobRows(&order);
  size_t bounded = 0;
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) {
    // Only numbers have limits (the table gives other kinds 0, 0).
    if (knob.kind != nccl_lamport::KnobKind::Bytes && knob.kind != nccl_lamport::KnobKind::Ms) continue;
    const bool hasMaximum = knob.maximum != nccl_lamport::kNoKnobMaximum;
    if (knob.minimum == 0 && !hasMaximum) continue;
    ++bounded;
    auto row = rows.find(knob.variable);
    if (row == rows.end() || row->second.size() < 3) continue;  // reported by the tests above
    const std::string limits = std::to_string(knob.minimum) +
                               (hasMaximum ? " to " + std::to_string(knob.maximum) : std::string(" or more"));
    EXPECT_NE(row->second[2].find(limits), std::string::npos)
        << knob.variable << ": the README's unit cell \"" << row->second[2] << "\" does not say \"" << limits << "\"";
  }
  EXPECT_GT(bounded, 0u) << "no knob has limits: the table changed, check this test";
}

// What the README check compares with is what the parser reads: parseConfig asks the environment
// for every variable of knobTable() and for nothing else.
TEST(ReadmeKnobs, TheParserReadsExactlyItsTable) {
  std::multiset<std::string> asked;
  nccl_lamport::parseConfig([&asked](const char* name) -> const char* {
    asked.insert(name);
    return nullptr;
  });
  std::multiset<std::string> table;
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) table.insert(knob.variable);
  EXPECT_EQ(asked, table);
}

// No NCCL_LAMPORT_* variable is read behind the table's back: every getenv of such a name in the
// shipped code (plugin/, common/, tuner/, kernels/, include/) is a knob of the table, so that the
// README lists everything that changes what the object does.
TEST(ReadmeKnobs, TheShippedCodeReadsNoOtherNcclLamportVariable) {
  std::set<std::string> known;
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) known.insert(knob.variable);
  const std::regex read(R"re(getenv\s*\(\s*"(NCCL_LAMPORT_[A-Z0-9_]+)")re");
  const std::set<std::string> sourceExtensions{".c", ".cc", ".h", ".cu", ".cuh"};
  size_t filesRead = 0;
  for (const char* folder : {"plugin", "common", "tuner", "kernels", "include"}) {
    const std::filesystem::path root = std::filesystem::path(NCCL_LAMPORT_SOURCE_DIR) / folder;
    ASSERT_TRUE(std::filesystem::is_directory(root)) << root;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (!entry.is_regular_file() || sourceExtensions.count(entry.path().extension().string()) == 0) continue;
      std::ifstream in(entry.path());
      std::stringstream text;
      text << in.rdbuf();
      ++filesRead;
      const std::string body = text.str();
      for (std::sregex_iterator m(body.begin(), body.end(), read), end; m != end; ++m) {
        EXPECT_EQ(known.count((*m)[1].str()), 1u)
            << entry.path() << " reads " << (*m)[1].str() << ", which is not in common/knobs.h (nor the README)";
      }
    }
  }
  EXPECT_GT(filesRead, 20u) << "the shipped sources were not found under " << NCCL_LAMPORT_SOURCE_DIR;
}

}  // namespace
