// CPU tests of the tuner-activation build's rule (tests/gpu/activation_mode.h): which environment
// runs the forked GPU tests in tuner activation, and which would silently test the other mode.
#include "tests/gpu/activation_mode.h"

#include <gtest/gtest.h>

#include <string>

namespace nccl_lamport {
namespace gputest {
namespace {

constexpr const char* kTuner = "/stage/lib/libnccl-tuner-lamport.so";

TEST(TunerActivationEnv, OnlyTheTunerPluginIsAccepted) {
  EXPECT_EQ(tunerActivationEnvProblem(kTuner, nullptr, nullptr), "");
  EXPECT_EQ(tunerActivationEnvProblem(kTuner, "", ""), "");
  // Other preloaded or audited libraries are none of our business.
  EXPECT_EQ(tunerActivationEnvProblem(kTuner, "/usr/lib/libjemalloc.so libfoo.so", "/opt/libaudit.so"), "");
}

TEST(TunerActivationEnv, MissingOrRelativeTunerPluginIsAProblem) {
  EXPECT_NE(tunerActivationEnvProblem(nullptr, nullptr, nullptr).find("NCCL_TUNER_PLUGIN is not set"),
            std::string::npos);
  EXPECT_NE(tunerActivationEnvProblem("", nullptr, nullptr).find("NCCL_TUNER_PLUGIN is not set"), std::string::npos);
  // "lamport" is how users name it; the tests need the path NCCL opened, for dlopen RTLD_NOLOAD.
  EXPECT_NE(tunerActivationEnvProblem("lamport", nullptr, nullptr).find("not an absolute path"), std::string::npos);
}

TEST(TunerActivationEnv, PreloadedInterposerIsAProblem) {
  for (const char* preload : {"/stage/lib/libnccl-lamport.so", "libfoo.so:/stage/lib/libnccl-lamport.so",
                              "libfoo.so  libnccl-lamport.so", "/stage/lib/libnccl-tuner-lamport.so"}) {
    const std::string problem = tunerActivationEnvProblem(kTuner, preload, nullptr);
    EXPECT_NE(problem.find("LD_PRELOAD names"), std::string::npos) << preload << ": " << problem;
  }
}

TEST(TunerActivationEnv, AuditRedirectIsAProblem) {
  const std::string problem = tunerActivationEnvProblem(kTuner, nullptr, "/stage/lib/libnccl-lamport-audit.so");
  EXPECT_NE(problem.find("LD_AUDIT names /stage/lib/libnccl-lamport-audit.so"), std::string::npos) << problem;
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
