// When the preloaded object registers itself as NCCL's tuner (shouldSelfRegisterAsTuner,
// preloadListNames: SPEC 2) and why a tuner-only process has no Lamport path (tunerOnlyReason,
// issue 9). Pure decisions on strings: no tuner struct, no logger, no GPU, no NCCL. The exported
// tuner structs themselves are tested in test_tuner.cc.
#include <gtest/gtest.h>

#include <string>

#include "tuner/load_mode.h"

namespace nccl_lamport {
namespace {

TEST(SelfRegisterTest, RegistersWhenPreloadedAndNoTunerIsSet) {
  const char* self = "/opt/nccl-lamport/lib/libnccl-lamport.so";
  EXPECT_TRUE(shouldSelfRegisterAsTuner(self, nullptr, self));
  EXPECT_TRUE(shouldSelfRegisterAsTuner("libnccl-lamport.so", nullptr, self));
  EXPECT_TRUE(shouldSelfRegisterAsTuner("/usr/lib/libfoo.so:/opt/nccl-lamport/lib/libnccl-lamport.so",
                                        nullptr, self));
  EXPECT_TRUE(shouldSelfRegisterAsTuner("libfoo.so /opt/nccl-lamport/lib/libnccl-lamport.so  ",
                                        nullptr, self));
  EXPECT_TRUE(shouldSelfRegisterAsTuner("::libnccl-lamport.so::", nullptr, self));
  EXPECT_TRUE(shouldSelfRegisterAsTuner("./lib/libnccl-lamport.so", nullptr, self));
  // An empty NCCL_TUNER_PLUGIN is as good as unset.
  EXPECT_TRUE(shouldSelfRegisterAsTuner(self, "", self));
  // Preloaded through the tuner-name symlink.
  EXPECT_TRUE(shouldSelfRegisterAsTuner("/opt/lib/libnccl-tuner-lamport.so", nullptr,
                                        "/opt/lib/libnccl-tuner-lamport.so"));
}

TEST(SelfRegisterTest, NeverOverridesTheUsersTunerChoice) {
  const char* self = "/opt/nccl-lamport/lib/libnccl-lamport.so";
  EXPECT_FALSE(shouldSelfRegisterAsTuner(self, "none", self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner(self, "lamport", self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner(self, "/other/libnccl-tuner-ofi.so", self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner(self, self, self));
}

TEST(SelfRegisterTest, DoesNothingWhenNotPreloaded) {
  const char* self = "/opt/nccl-lamport/lib/libnccl-lamport.so";
  EXPECT_FALSE(shouldSelfRegisterAsTuner(nullptr, nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("", nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("  : ", nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("/usr/lib/libjemalloc.so", nullptr, self));
  // Similar names are not ours.
  EXPECT_FALSE(shouldSelfRegisterAsTuner("/opt/lib/libnccl-lamport.so.bak", nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("/opt/lib/xlibnccl-lamport.so", nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("libnccl-lamport", nullptr, self));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("/opt/nccl-lamport/lib/", nullptr, self));
}

TEST(SelfRegisterTest, PreloadListNames) {
  // Also decides whether a tuner-only notice is right: a preloaded object stays quiet.
  const char* self = "/opt/lib/libnccl-lamport.so";
  EXPECT_TRUE(preloadListNames(self, self));
  EXPECT_TRUE(preloadListNames("libasan.so libnccl-lamport.so", self));
  EXPECT_TRUE(preloadListNames("/elsewhere/libnccl-lamport.so", self));
  EXPECT_FALSE(preloadListNames("libnccl-tuner-lamport.so", self));
  EXPECT_FALSE(preloadListNames(nullptr, self));
  EXPECT_FALSE(preloadListNames("", self));
  EXPECT_FALSE(preloadListNames(self, nullptr));
  EXPECT_FALSE(preloadListNames(self, "relative/libnccl-lamport.so"));
}

TEST(SelfRegisterTest, NeedsAnAbsolutePathOfOurOwn) {
  EXPECT_FALSE(shouldSelfRegisterAsTuner("libnccl-lamport.so", nullptr, nullptr));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("libnccl-lamport.so", nullptr, ""));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("libnccl-lamport.so", nullptr, "libnccl-lamport.so"));
  EXPECT_FALSE(shouldSelfRegisterAsTuner("libnccl-lamport.so", nullptr, "/opt/lib/"));
}

// Why a tuner-only process has no Lamport path, as the notice says it (issue 9).
TEST(TunerOnlyReason, SaysWhatTurnsThePathOn) {
  EXPECT_EQ(tunerOnlyReason(6, false, false, ""), "NCCL_LAMPORT_ENABLE=0");
  for (int v : {2, 3, 4}) {
    const std::string r = tunerOnlyReason(v, true, true, "");
    EXPECT_NE(r.find("NCCL 2.28 or later"), std::string::npos) << r;
    EXPECT_NE(r.find("tuner ABI v" + std::to_string(v)), std::string::npos) << r;
    EXPECT_NE(r.find("LD_PRELOAD"), std::string::npos) << r;
  }
  EXPECT_NE(tunerOnlyReason(5, true, false, "").find("NCCL_LAMPORT_TUNER_HOOKS=1"), std::string::npos);
  EXPECT_EQ(tunerOnlyReason(7, true, true, "mprotect refused"), "entry hooks not capable: mprotect refused");
}

}  // namespace
}  // namespace nccl_lamport
