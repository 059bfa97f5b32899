// NCCL's settings that keep a communicator on NCCL, as NCCL 2.28 reads them
// (plugin/comm/nccl_settings.h): the P2P switches after ncclGetLevel in NCCL's src/graph/paths.cc,
// NCCL_ALGO / NCCL_PROTO after parseList in src/graph/tuning.cc. No GPU.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "plugin/comm/nccl_settings.h"

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

using nccl_lamport::ncclAllReduceChoiceReason;

bool chooses(const char* value) { return !ncclAllReduceChoiceReason("NCCL_ALGO", value).empty(); }

TEST(NcclAllReduceChoice, AListForEveryFunctionChooses) {
  EXPECT_FALSE(chooses(nullptr));
  EXPECT_TRUE(chooses("Ring"));
  EXPECT_TRUE(chooses("ring,collnetdirect"));
  EXPECT_TRUE(chooses("Simple"));  // NCCL_PROTO's lists parse alike
}

TEST(NcclAllReduceChoice, ExclusionsLeaveTheChoiceToNccl) {
  EXPECT_FALSE(chooses("^NVLS"));
  EXPECT_FALSE(chooses("^LL128"));
  EXPECT_FALSE(chooses("allreduce:^tree"));
}

TEST(NcclAllReduceChoice, OnlyEntriesForAllReduceCount) {
  EXPECT_TRUE(chooses("allreduce:tree"));  // SGLang's deterministic inference
  EXPECT_TRUE(chooses("AllReduce:Tree"));  // NCCL compares function names case-insensitively
  EXPECT_FALSE(chooses("allgather:ring"));
  EXPECT_FALSE(chooses("broadcast:ring;reducescatter:ring"));
  EXPECT_TRUE(chooses("allgather:ring;allreduce:tree"));
}

TEST(NcclAllReduceChoice, TheLastEntryForAllReduceDecides) {
  EXPECT_FALSE(chooses("ring,tree;allreduce:^ring"));  // NCCL's own example: allreduce excludes
  EXPECT_TRUE(chooses("^LL128;allreduce:LL128"));      // and the reverse
  EXPECT_TRUE(chooses("ring;allgather:tree"));          // the first entry still covers allreduce
}

TEST(NcclAllReduceChoice, AValueNcclRejectsDecidesNothing) {
  EXPECT_FALSE(chooses("allgather:ring;tree"));  // an entry without a function after the first
  EXPECT_FALSE(chooses(""));
}

TEST(NcclAllReduceChoice, TheReasonNamesTheVariableAndItsValue) {
  EXPECT_EQ(ncclAllReduceChoiceReason("NCCL_PROTO", "Simple").find("NCCL_PROTO=Simple"), 0u);
}

TEST(NcclCommBlocking, OnlyZeroOrOneOverridesTheConfig) {
  using nccl_lamport::ncclCommBlockingOverride;
  EXPECT_EQ(ncclCommBlockingOverride(nullptr), -1);
  EXPECT_EQ(ncclCommBlockingOverride(""), -1) << "empty is unset, as in NCCL";
  EXPECT_EQ(ncclCommBlockingOverride("1"), 1);
  EXPECT_EQ(ncclCommBlockingOverride("0"), 0);
  EXPECT_EQ(ncclCommBlockingOverride("0x1"), 1) << "base 0, as strtoll";
  EXPECT_EQ(ncclCommBlockingOverride("2"), -1);
  EXPECT_EQ(ncclCommBlockingOverride("-1"), -1);
  EXPECT_EQ(ncclCommBlockingOverride("99999999999999999999"), -1) << "out of range: NCCL's default";
}

TEST(NcclCommBlocking, TextThatIsNoNumberIsZeroAsInNccl) {
  // NCCL's ncclLoadParam takes strtoll's value without looking at where it stopped: "false"
  // makes every communicator non-blocking there, so it must here too.
  EXPECT_EQ(nccl_lamport::ncclCommBlockingOverride("false"), 0);
  EXPECT_EQ(nccl_lamport::ncclCommBlockingOverride("yes"), 0);
  EXPECT_EQ(nccl_lamport::ncclCommBlockingOverride("1abc"), 1);
}

TEST(NcclMemSyncDomain, RemoteUnlessTheVariableReadsZero) {
  EXPECT_TRUE(nccl_lamport::ncclUsesRemoteSyncDomain(nullptr));  // NCCL's default, 1
  EXPECT_TRUE(nccl_lamport::ncclUsesRemoteSyncDomain(""));       // empty: NCCL keeps its default
  EXPECT_TRUE(nccl_lamport::ncclUsesRemoteSyncDomain("1"));
  EXPECT_FALSE(nccl_lamport::ncclUsesRemoteSyncDomain("0"));
  EXPECT_FALSE(nccl_lamport::ncclUsesRemoteSyncDomain("0x0"));   // base 0, as NCCL
  EXPECT_FALSE(nccl_lamport::ncclUsesRemoteSyncDomain("off"));   // no number: strtoll's 0
  EXPECT_TRUE(nccl_lamport::ncclUsesRemoteSyncDomain("2"));      // CUDA refuses it for NCCL; remote here
  EXPECT_TRUE(nccl_lamport::ncclUsesRemoteSyncDomain("99999999999999999999"));  // out of range: the default
}

// Read once, as NCCL reads its parameters (this test is the binary's only reader, and ctest runs
// each test in a process of its own).
TEST(NcclMemSyncDomain, TheProcessReadsTheVariableOnce) {
  setenv("NCCL_MEM_SYNC_DOMAIN", "0", 1);
  EXPECT_FALSE(nccl_lamport::processUsesRemoteSyncDomain());
  unsetenv("NCCL_MEM_SYNC_DOMAIN");
  EXPECT_FALSE(nccl_lamport::processUsesRemoteSyncDomain()) << "read again";
}

// The process's reading comes from its environment (this binary's only reader): NCCL_P2P_* at the
// first call, kept; NCCL_ALGO / NCCL_PROTO at every call.
TEST(NcclSettings, TheProcessReadsP2pOnceAndTheAlgorithmEveryTime) {
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_PROTO");
  unsetenv("NCCL_P2P_DISABLE");
  unsetenv("NCCL_P2P_LEVEL");
  EXPECT_EQ(nccl_lamport::processNcclSettingsOffReason(), "");
  setenv("NCCL_P2P_LEVEL", "LOC", 1);
  EXPECT_EQ(nccl_lamport::processNcclSettingsOffReason(), "");  // the P2P level was read unset
  setenv("NCCL_PROTO", "Simple", 1);
  EXPECT_NE(nccl_lamport::processNcclSettingsOffReason().find("NCCL_PROTO=Simple"), std::string::npos);
  unsetenv("NCCL_PROTO");
  setenv("NCCL_ALGO", "allreduce:tree", 1);
  EXPECT_NE(nccl_lamport::processNcclSettingsOffReason().find("NCCL_ALGO=allreduce:tree"), std::string::npos);
  unsetenv("NCCL_ALGO");
  unsetenv("NCCL_P2P_LEVEL");
  EXPECT_EQ(nccl_lamport::processNcclSettingsOffReason(), "");
}

}  // namespace
