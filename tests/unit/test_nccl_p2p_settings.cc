// NCCL's P2P switches as NCCL 2.28 reads them (plugin/comm/nccl_p2p_settings.h, after ncclGetLevel
// in NCCL's src/graph/paths.cc): which values keep a communicator off the Lamport path. No GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "plugin/comm/nccl_p2p_settings.h"

namespace {

using nccl_lamport::ncclP2pOffReason;

bool off(const char* disable, const char* level) { return !ncclP2pOffReason(disable, level).empty(); }

TEST(NcclP2pSettings, UnsetAllowsP2p) { EXPECT_FALSE(off(nullptr, nullptr)); }

TEST(NcclP2pSettings, DisableIsAnIntegerInBaseZeroComparedWithOne) {
  EXPECT_TRUE(off("1", nullptr));
  EXPECT_TRUE(off("0x1", nullptr));
  EXPECT_TRUE(off(" 1", nullptr));  // strtol skips leading blanks
  EXPECT_FALSE(off("0", nullptr));
  EXPECT_FALSE(off("2", nullptr));  // NCCL compares with 1: any other value leaves P2P on
  EXPECT_FALSE(off("", nullptr));
  EXPECT_FALSE(off("yes", nullptr));
}

TEST(NcclP2pSettings, DisableWinsOverTheLevel) {
  EXPECT_TRUE(off("1", "SYS"));
  EXPECT_FALSE(off("0", "NVL"));
  EXPECT_TRUE(off("0", "LOC"));  // a disable that is not 1 leaves the level in charge
}

TEST(NcclP2pSettings, OnlyLevelLocRulesOutNvlink) {
  EXPECT_TRUE(off(nullptr, "LOC"));
  for (const char* level : {"NVL", "NVB", "C2C", "PIX", "PXB", "P2C", "PXN", "PHB", "SYS"}) {
    EXPECT_FALSE(off(nullptr, level)) << level;
  }
}

TEST(NcclP2pSettings, OldStyleLevelNumbersMapZeroToLoc) {
  EXPECT_TRUE(off(nullptr, "0"));
  EXPECT_TRUE(off(nullptr, "0x0"));
  for (const char* level : {"1", "2", "3", "4", "5", "99"}) EXPECT_FALSE(off(nullptr, level)) << level;
}

TEST(NcclP2pSettings, LevelNamesAreCaseSensitiveAndUnknownTextIsUnset) {
  EXPECT_FALSE(off(nullptr, "loc"));   // NCCL's strcmp: no match, no digit, so the level stays unset
  EXPECT_FALSE(off(nullptr, "-1"));    // not a digit first either
  EXPECT_FALSE(off(nullptr, ""));
}

TEST(NcclP2pSettings, TheReasonNamesTheVariableAndItsValue) {
  EXPECT_NE(ncclP2pOffReason("1", nullptr).find("NCCL_P2P_DISABLE=1"), std::string::npos);
  EXPECT_NE(ncclP2pOffReason(nullptr, "0").find("NCCL_P2P_LEVEL=0"), std::string::npos);
}

// The process's reading comes from its environment at the first call (this binary's only reader).
TEST(NcclP2pSettings, TheProcessReadsItsEnvironmentOnce) {
  setenv("NCCL_P2P_LEVEL", "LOC", 1);
  unsetenv("NCCL_P2P_DISABLE");
  const std::string first = nccl_lamport::processNcclP2pOffReason();
  EXPECT_NE(first.find("NCCL_P2P_LEVEL=LOC"), std::string::npos) << first;
  unsetenv("NCCL_P2P_LEVEL");
  EXPECT_EQ(nccl_lamport::processNcclP2pOffReason(), first);  // kept, as NCCL keeps its level
}

}  // namespace
