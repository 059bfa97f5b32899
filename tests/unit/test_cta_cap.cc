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

// The process's NCCL_MAX_CTAS replaces every config's cap (this binary's only reader).
TEST(CtaCap, TheEnvironmentReplacesEveryConfigsCap) {
  setenv("NCCL_MAX_CTAS", "4", 1);
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(0), 4);
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(16), 4);
  unsetenv("NCCL_MAX_CTAS");
  EXPECT_EQ(nccl_lamport::effectiveCtaCap(16), 4);  // read once, as NCCL's parameters are
}

}  // namespace
