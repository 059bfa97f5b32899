// The CTA cap of a communicator (plugin/comm/cta_cap.h): config.maxCTAs where the config has the
// field, NCCL_MAX_CTAS as NCCL 2.28 reads it, and the notes that carry the cap from the init or
// split wrapper to the set-up. No GPU.
#include <gtest/gtest.h>

#include <climits>
#include <cstdlib>

#include "plugin/comm/cta_cap.h"

namespace {

using nccl_lamport::ctaCapFromConfig;
using nccl_lamport::ctaCapFromEnvironment;

TEST(CtaCap, ConfigGivesItsPositiveMaxCtas) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  EXPECT_EQ(ctaCapFromConfig(nullptr), 0);
  EXPECT_EQ(ctaCapFromConfig(&config), 0);  // NCCL_CONFIG_UNDEF_INT: no cap
  config.maxCTAs = 8;
  EXPECT_EQ(ctaCapFromConfig(&config), 8);
  config.maxCTAs = 0;
  EXPECT_EQ(ctaCapFromConfig(&config), 0);  // NCCL refuses it at init; we take no cap
}

TEST(CtaCap, AConfigOlderThanNccl217HasNoMaxCtas) {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.maxCTAs = 8;
  config.version = NCCL_VERSION(2, 16, 5);  // its struct ends before the field: never read it
  EXPECT_EQ(ctaCapFromConfig(&config), 0);
  config.version = NCCL_VERSION(2, 17, 1);
  EXPECT_EQ(ctaCapFromConfig(&config), 8);
}

TEST(CtaCap, EnvironmentIsAPositiveIntegerInBaseZero) {
  EXPECT_EQ(ctaCapFromEnvironment(nullptr), 0);
  EXPECT_EQ(ctaCapFromEnvironment("8"), 8);
  EXPECT_EQ(ctaCapFromEnvironment("0x10"), 16);
  EXPECT_EQ(ctaCapFromEnvironment("0"), 0);   // NCCL: "too low", ignored
  EXPECT_EQ(ctaCapFromEnvironment("-4"), 0);
  EXPECT_EQ(ctaCapFromEnvironment(""), 0);
  EXPECT_EQ(ctaCapFromEnvironment("many"), 0);
  EXPECT_EQ(ctaCapFromEnvironment("99999999999"), INT_MAX);
}

TEST(CtaCap, NotesMoveFromTheChildSlotToItsHandle) {
  ncclComm_t slot = nullptr;  // where NCCL writes a split child
  auto* child = reinterpret_cast<ncclComm_t>(0x1000);
  nccl_lamport::noteCtaCap(&slot, 5);
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 5);
  nccl_lamport::moveCtaCap(&slot, child);
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 0);
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 5);
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 0);  // taken once
  nccl_lamport::noteCtaCap(child, 7);
  nccl_lamport::noteCtaCap(child, 0);  // a later note (a new communicator under a reused handle) wins
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 0);
}

TEST(CtaCap, AMovedNoteReplacesOneUnderTheHandle) {
  ncclComm_t slot = nullptr;
  auto* child = reinterpret_cast<ncclComm_t>(0x2000);
  nccl_lamport::noteCtaCap(child, 3);  // a leftover under the same address
  nccl_lamport::noteCtaCap(&slot, 9);
  nccl_lamport::moveCtaCap(&slot, child);
  EXPECT_EQ(nccl_lamport::peekCtaCap(&slot), 0);
  EXPECT_EQ(nccl_lamport::takeCtaCap(child), 9);
  nccl_lamport::moveCtaCap(&slot, child);  // nothing under the slot: nothing changes
  EXPECT_EQ(nccl_lamport::peekCtaCap(child), 0);
}

// NCCL_MAX_NCHANNELS (or the older NCCL_MAX_NRINGS) bounds NCCL's kernels too (ncclMaxNchannels in
// NCCL's src/graph/connect.cc), clamped to [1, 64]; text that is no number reads as 0, so 1.
TEST(CtaCap, TheChannelBoundIsReadAsNcclReadsIt) {
  using nccl_lamport::channelCapFromEnvironment;
  EXPECT_EQ(channelCapFromEnvironment(nullptr, nullptr), 0);
  EXPECT_EQ(channelCapFromEnvironment("8", nullptr), 8);
  EXPECT_EQ(channelCapFromEnvironment(nullptr, "6"), 6);
  EXPECT_EQ(channelCapFromEnvironment("8", "6"), 8);  // NCCL_MAX_NCHANNELS wins
  EXPECT_EQ(channelCapFromEnvironment("", "6"), 6);   // empty is unset
  EXPECT_EQ(channelCapFromEnvironment("0", nullptr), 1);
  EXPECT_EQ(channelCapFromEnvironment("many", nullptr), 1);
  EXPECT_EQ(channelCapFromEnvironment("500", nullptr), 64);
  EXPECT_EQ(channelCapFromEnvironment("-2", "6"), 6);  // -2 is NCCL's "not set"
  EXPECT_EQ(channelCapFromEnvironment("99999999999999999999", nullptr), 0);  // out of range: unset
}

// What NCCL runs at most: NCCL_MAX_CTAS replaces the config's cap, 64 (MAXCHANNELS) bounds any
// cap, and the channel bound applies on top. Before, a config cap of 128 stayed 128 and
// NCCL_MAX_NCHANNELS=8 left our grid unbounded (found by a review of session 18).
TEST(CtaCap, TheCapCombinesAsNcclsKernelsAreCapped) {
  using nccl_lamport::combinedCtaCap;
  EXPECT_EQ(combinedCtaCap(0, 0, 0), 0);
  EXPECT_EQ(combinedCtaCap(16, 0, 0), 16);
  EXPECT_EQ(combinedCtaCap(16, 4, 0), 4);
  EXPECT_EQ(combinedCtaCap(128, 0, 0), 64);
  EXPECT_EQ(combinedCtaCap(0, 0, 8), 8);
  EXPECT_EQ(combinedCtaCap(16, 0, 8), 8);
  EXPECT_EQ(combinedCtaCap(4, 0, 8), 4);
  for (int cap : {0, 3, 100}) {  // applying it twice changes nothing
    EXPECT_EQ(combinedCtaCap(combinedCtaCap(cap, 5, 4), 5, 4), combinedCtaCap(cap, 5, 4));
  }
}

// The process's variables (this test is the binary's only reader): read once, as NCCL's
// parameters are.
TEST(CtaCap, TheProcessReadsItsVariablesOnce) {
  setenv("NCCL_MAX_CTAS", "4", 1);
  setenv("NCCL_MAX_NCHANNELS", "8", 1);
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(0), 4);
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(16), 4);
  unsetenv("NCCL_MAX_CTAS");
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(16), 4);
  unsetenv("NCCL_MAX_NCHANNELS");
}

}  // namespace
