// The set-up verdict helpers (plugin/comm/setup_verdict.h) that need no GPU: the round-2 verdict
// from the ok words, its message, and what the ON line and the reason say about the two-shot
// crossover.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "plugin/comm/setup_state.h"
#include "plugin/comm/setup_verdict.h"
#include "tuner/routing.h"

namespace nccl_lamport {
namespace {

std::vector<char> okWords(const std::vector<uint32_t>& oks) {
  std::vector<char> words(oks.size() * sizeof(OkRecord), '\x5a');  // padding poisoned, never read
  for (size_t r = 0; r < oks.size(); ++r) {
    OkRecord rec{};
    std::memset(&rec, 0x5a, sizeof(rec));
    rec.ok = oks[r];
    std::memcpy(words.data() + r * sizeof(OkRecord), &rec, sizeof(rec));
  }
  return words;
}

TEST(SetupVerdict, EveryRankOkIsAYesWithNoFirstNo) {
  const std::vector<char> words = okWords({1, 1, 1, 1});
  int firstNo = 7;
  EXPECT_TRUE(allRanksOk(words.data(), 4, &firstNo));
  EXPECT_EQ(firstNo, -1);
}

TEST(SetupVerdict, TheLowestRankThatSaidNoIsNamed) {
  const std::vector<char> words = okWords({1, 0, 1, 0});
  int firstNo = -1;
  EXPECT_FALSE(allRanksOk(words.data(), 4, &firstNo));
  EXPECT_EQ(firstNo, 1);
  EXPECT_EQ(peerNotOkReason(firstNo), "rank 1 could not map its peers");
}

TEST(SetupVerdict, OnlyTheFirstNRanksWordsAreRead) {
  const std::vector<char> words = okWords({1, 1, 0});
  int firstNo = -1;
  EXPECT_TRUE(allRanksOk(words.data(), 2, &firstNo));
  EXPECT_FALSE(allRanksOk(words.data(), 3, &firstNo));
  EXPECT_EQ(firstNo, 2);
}

TEST(SetupVerdict, TheTwoShotCrossoverIsNamedOnlyWhereTwoShotTakesMessages) {
  RoutingTable table;
  table.oneShotMaxBytes = 256 * 1024;
  table.twoShotMaxBytes = 4 * 1024 * 1024;
  EXPECT_EQ(twoShotNote(table, kTwoShotMinRanks), ", two-shot up to 4194304 bytes");
  EXPECT_EQ(twoShotNote(table, kTwoShotMinRanks - 1), "") << "no two-shot kernel below its rank count";
  table.twoShotMaxBytes = 0;
  EXPECT_EQ(twoShotNote(table, 8), "") << "two-shot off";
  table.twoShotMaxBytes = table.oneShotMaxBytes;
  EXPECT_EQ(twoShotNote(table, 8), "") << "a crossover at or below the one-shot's takes nothing";
}

TEST(SetupVerdict, TheEligibleReasonNamesBothCrossoversAndTheBlockCap) {
  LamportComm lc;
  lc.nRanks = 8;
  lc.table.oneShotMaxBytes = 65536;
  lc.table.twoShotMaxBytes = 1048576;
  lc.maxCtas = 8;
  EXPECT_EQ(eligibleReason(lc), "Lamport one-shot up to 65536 bytes, two-shot up to 1048576 bytes, at most 8 "
                                "blocks per launch (NCCL's block limit)");
  lc.nRanks = 2;
  lc.maxCtas = 0;
  EXPECT_EQ(eligibleReason(lc), "Lamport one-shot up to 65536 bytes");
}

}  // namespace
}  // namespace nccl_lamport
