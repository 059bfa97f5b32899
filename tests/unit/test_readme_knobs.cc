// The README's knob table must list every knob the code reads, with the code's default: users
// set these variables from the README alone.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>

#include "common/config.h"

namespace {

std::string readReadme() {
  std::ifstream in(NCCL_LAMPORT_README);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The README row of `variable`: the line that starts with "| `VARIABLE` |".
std::string rowOf(const std::string& readme, const std::string& variable) {
  const std::string start = "| `" + variable + "` |";
  const size_t at = readme.find(start);
  if (at == std::string::npos) return "";
  return readme.substr(at, readme.find('\n', at) - at);
}

TEST(ReadmeKnobs, EveryKnobHasARowWithItsDefaultAndUnit) {
  const std::string readme = readReadme();
  ASSERT_FALSE(readme.empty()) << NCCL_LAMPORT_README;
  for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) {
    const std::string row = rowOf(readme, knob.variable);
    ASSERT_FALSE(row.empty()) << knob.variable << " has no row in the README's knob table";
    // Cells: | variable | default | unit | meaning |
    const size_t defaultStart = row.find('|', 1) + 1;
    const std::string defaultCell = row.substr(defaultStart, row.find('|', defaultStart) - defaultStart);
    const std::string defaultText = knob.defaultText;
    const std::string firstWord = defaultText.substr(0, defaultText.find(' '));
    EXPECT_NE(defaultCell.find(firstWord), std::string::npos)
        << knob.variable << ": README gives the default as" << defaultCell << ", the code " << defaultText;
    EXPECT_NE(row.find(knob.unit), std::string::npos) << knob.variable << ": unit " << knob.unit << ": " << row;
  }
}

TEST(ReadmeKnobs, EveryReadmeKnobIsReadByTheCode) {
  const std::string readme = readReadme();
  size_t at = 0;
  int rows = 0;
  while ((at = readme.find("| `NCCL_LAMPORT_", at)) != std::string::npos) {
    const size_t begin = at + 3;
    const std::string variable = readme.substr(begin, readme.find('`', begin) - begin);
    bool known = false;
    for (const nccl_lamport::KnobInfo& knob : nccl_lamport::knobTable()) known = known || variable == knob.variable;
    EXPECT_TRUE(known) << variable << " is in the README but the code does not read it";
    ++rows;
    at = begin;
  }
  EXPECT_EQ(rows, static_cast<int>(nccl_lamport::knobTable().size()));
}

}  // namespace
