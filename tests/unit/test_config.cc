// NCCL_LAMPORT_* parsing (common/config.h). The environment is a fake map passed in; these
// tests never call setenv.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "common/config.h"
#include "common/log.h"
#include "tests/unit/log_capture.h"

namespace nccl_lamport {
namespace {

constexpr size_t kKiB = size_t{1} << 10;
constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kGiB = size_t{1} << 30;

class ConfigTest : public ::testing::Test {
 protected:
  // Parses with exactly these variables set.
  Config parse(const std::map<std::string, std::string>& vars) {
    env_ = vars;
    return parseConfig([this](const char* name) -> const char* {
      auto it = env_.find(name);
      return it == env_.end() ? nullptr : it->second.c_str();
    });
  }

  static std::vector<std::string> warnings() { return LogCapture::linesWith(" NCCL WARN Lamport: "); }

  // One WARN naming the variable and the value, and nothing else logged.
  static void expectOneWarning(const std::string& variable, const std::string& value) {
    const std::vector<std::string> lines = warnings();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find(variable + "=\"" + value + "\""), std::string::npos) << lines[0];
    EXPECT_NE(lines[0].find("keeping the default"), std::string::npos) << lines[0];
    EXPECT_EQ(LogCapture::lines().size(), 1u);
  }

  static void clearLines() { LogCapture::clear(); }

  LogCapture log_;  // WARNs, from before SetUp until after TearDown
  std::map<std::string, std::string> env_;
};

// The documented defaults, written out here (not read back from Config or the table): a changed
// default must change this test and the README together.
TEST_F(ConfigTest, DefaultsWithAnEmptyEnvironment) {
  const Config config = parse({});
  EXPECT_TRUE(config.enable);
  EXPECT_EQ(config.oneShotMaxBytes, 0u);
  EXPECT_EQ(config.workspaceMaxBytes, 64 * kMiB);
  EXPECT_EQ(config.timeoutMs, 600000u);
  EXPECT_EQ(config.ncclPath, "");
  EXPECT_FALSE(config.auditDebug);
  EXPECT_TRUE(config.requireNvlink);
  EXPECT_TRUE(warnings().empty());
}

// A value set to something else than the default really moves away from it: the empty
// environment's result above is the default, not a value that ignores the environment.
TEST_F(ConfigTest, EmptyEnvironmentDiffersFromASetOne) {
  const Config empty = parse({});
  const Config set = parse({{"NCCL_LAMPORT_ENABLE", "0"},
                            {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "1M"},
                            {"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "2M"},
                            {"NCCL_LAMPORT_TIMEOUT_MS", "7"},
                            {"NCCL_LAMPORT_NCCL_PATH", "/x"},
                            {"NCCL_LAMPORT_AUDIT_DEBUG", "1"},
                            {"NCCL_LAMPORT_REQUIRE_NVLINK", "0"}});
  EXPECT_NE(empty.enable, set.enable);
  EXPECT_NE(empty.oneShotMaxBytes, set.oneShotMaxBytes);
  EXPECT_NE(empty.workspaceMaxBytes, set.workspaceMaxBytes);
  EXPECT_NE(empty.timeoutMs, set.timeoutMs);
  EXPECT_NE(empty.ncclPath, set.ncclPath);
  EXPECT_NE(empty.auditDebug, set.auditDebug);
  EXPECT_NE(empty.requireNvlink, set.requireNvlink);
}

TEST_F(ConfigTest, UnrelatedVariablesAreIgnored) {
  const Config config = parse({{"NCCL_DEBUG", "INFO"}, {"NCCL_LAMPORT_ENABLED", "0"}});
  EXPECT_TRUE(config.enable);
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ConfigTest, EveryKnob) {
  const Config config = parse({
      {"NCCL_LAMPORT_ENABLE", "0"},
      {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "1M"},
      {"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "256M"},
      {"NCCL_LAMPORT_TIMEOUT_MS", "5000"},
      {"NCCL_LAMPORT_NCCL_PATH", "/opt/nccl/lib/libnccl.so.2"},
      {"NCCL_LAMPORT_REQUIRE_NVLINK", "0"},
  });
  EXPECT_FALSE(config.enable);
  EXPECT_EQ(config.oneShotMaxBytes, 1 * kMiB);
  EXPECT_EQ(config.workspaceMaxBytes, 256 * kMiB);
  EXPECT_EQ(config.timeoutMs, 5000u);
  EXPECT_EQ(config.ncclPath, "/opt/nccl/lib/libnccl.so.2");
  EXPECT_FALSE(config.requireNvlink);
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ConfigTest, BooleanSpellings) {
  for (const char* yes : {"1", "true", "TRUE", "True", "yes", "YES", "on", "ON", "On"}) {
    EXPECT_TRUE(parse({{"NCCL_LAMPORT_ENABLE", yes}}).enable) << yes;
    EXPECT_TRUE(parse({{"NCCL_LAMPORT_REQUIRE_NVLINK", yes}}).requireNvlink) << yes;
  }
  for (const char* no : {"0", "false", "FALSE", "no", "No", "off", "OFF", "Off"}) {
    EXPECT_FALSE(parse({{"NCCL_LAMPORT_ENABLE", no}}).enable) << no;
    EXPECT_FALSE(parse({{"NCCL_LAMPORT_REQUIRE_NVLINK", no}}).requireNvlink) << no;
  }
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ConfigTest, ByteSuffixes) {
  size_t bytes = 0;
  EXPECT_TRUE(parseByteSize("0", &bytes));
  EXPECT_EQ(bytes, 0u);
  EXPECT_TRUE(parseByteSize("65536", &bytes));
  EXPECT_EQ(bytes, 65536u);
  EXPECT_TRUE(parseByteSize("64K", &bytes));
  EXPECT_EQ(bytes, 64 * kKiB);
  EXPECT_TRUE(parseByteSize("64k", &bytes));
  EXPECT_EQ(bytes, 64 * kKiB);
  EXPECT_TRUE(parseByteSize("8M", &bytes));
  EXPECT_EQ(bytes, 8 * kMiB);
  EXPECT_TRUE(parseByteSize("8m", &bytes));
  EXPECT_EQ(bytes, 8 * kMiB);
  EXPECT_TRUE(parseByteSize("1G", &bytes));
  EXPECT_EQ(bytes, kGiB);
  EXPECT_TRUE(parseByteSize("3g", &bytes));
  EXPECT_EQ(bytes, 3 * kGiB);
  EXPECT_TRUE(parseByteSize("0K", &bytes));
  EXPECT_EQ(bytes, 0u);
  // The benchmark's spellings are the knobs' too (one parser, common/byte_size.h).
  EXPECT_TRUE(parseByteSize("64KiB", &bytes));
  EXPECT_EQ(bytes, 64 * kKiB);
  EXPECT_TRUE(parseByteSize("64kb", &bytes));
  EXPECT_EQ(bytes, 64 * kKiB);
  EXPECT_TRUE(parseByteSize("100B", &bytes));
  EXPECT_EQ(bytes, 100u);
  EXPECT_EQ(parse({{"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "512KiB"}}).oneShotMaxBytes, 512 * kKiB);

  EXPECT_EQ(parse({{"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "512K"}}).oneShotMaxBytes, 512 * kKiB);
  EXPECT_EQ(parse({{"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "2G"}}).workspaceMaxBytes, 2 * kGiB);
  EXPECT_EQ(parse({{"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "0"}}).oneShotMaxBytes, 0u);
  EXPECT_EQ(parse({{"NCCL_LAMPORT_TWOSHOT_MAX_BYTES", "8M"}}).twoShotMaxBytes, 8 * kMiB);
  EXPECT_EQ(parse({}).twoShotMaxBytes, 0u);
  EXPECT_TRUE(warnings().empty());
  EXPECT_EQ(parse({{"NCCL_LAMPORT_TWOSHOT_MAX_BYTES", "lots"}}).twoShotMaxBytes, 0u);
  EXPECT_FALSE(warnings().empty());
}

TEST_F(ConfigTest, KernelChoice) {
  EXPECT_FALSE(parse({}).baselineKernel);
  EXPECT_TRUE(parse({{"NCCL_LAMPORT_BASELINE_KERNEL", "1"}}).baselineKernel);
  EXPECT_TRUE(parse({{"NCCL_LAMPORT_BASELINE_KERNEL", "yes"}}).baselineKernel);
  EXPECT_FALSE(parse({{"NCCL_LAMPORT_BASELINE_KERNEL", "0"}}).baselineKernel);
  EXPECT_TRUE(warnings().empty());
  EXPECT_FALSE(parse({{"NCCL_LAMPORT_BASELINE_KERNEL", "turbo"}}).baselineKernel);
  EXPECT_FALSE(warnings().empty());
}

TEST_F(ConfigTest, MalformedByteSizesAreRejected) {
  size_t bytes = 12345;
  for (const char* bad : {"", "K", "M", "-1", "+1", " 1", "1 ", "1.5M", "1T", "0x10", "ten",
                          "1e6", "12K3", "64KK", "64Ki", "64iB", "8 K", "8Kx", "B"}) {
    EXPECT_FALSE(parseByteSize(bad, &bytes)) << '"' << bad << '"';
    EXPECT_EQ(bytes, 12345u) << "untouched on failure: " << bad;
  }
  EXPECT_FALSE(parseByteSize(nullptr, &bytes));
}

TEST_F(ConfigTest, Overflow) {
  uint64_t value = 0;
  EXPECT_TRUE(parseUnsigned("18446744073709551615", &value));
  EXPECT_EQ(value, std::numeric_limits<uint64_t>::max());
  EXPECT_FALSE(parseUnsigned("18446744073709551616", &value));
  EXPECT_FALSE(parseUnsigned("99999999999999999999999", &value));
  EXPECT_FALSE(parseUnsigned("", &value));
  EXPECT_FALSE(parseUnsigned(nullptr, &value));

  size_t bytes = 0;
  // 2^34 G = 2^64 bytes: one past size_t.
  EXPECT_FALSE(parseByteSize("17179869184G", &bytes));
  EXPECT_TRUE(parseByteSize("17179869183G", &bytes));
  EXPECT_EQ(bytes, size_t{17179869183} << 30);
  EXPECT_FALSE(parseByteSize("18014398509481984K", &bytes));  // 2^54 K = 2^64

  const Config config = parse({{"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "17179869184G"}});
  EXPECT_EQ(config.workspaceMaxBytes, 64 * kMiB);
  expectOneWarning("NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "17179869184G");
}

struct BadValueCase {
  const char* variable;
  const char* value;
};

TEST_F(ConfigTest, BadValuesKeepTheDefaultAndWarn) {
  const Config defaults;
  const BadValueCase cases[] = {
      {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "lots"},
      {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "-64K"},
      {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", ""},
      {"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "0"},
      {"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "64 MB"},
      {"NCCL_LAMPORT_WORKSPACE_MAX_BYTES", ""},
      {"NCCL_LAMPORT_TIMEOUT_MS", "0"},
      {"NCCL_LAMPORT_TIMEOUT_MS", "10s"},
      {"NCCL_LAMPORT_TIMEOUT_MS", "-5"},
      {"NCCL_LAMPORT_TIMEOUT_MS", ""},
      {"NCCL_LAMPORT_REQUIRE_NVLINK", "maybe"},
      {"NCCL_LAMPORT_REQUIRE_NVLINK", ""},
      {"NCCL_LAMPORT_AUDIT_DEBUG", "2"},
  };
  for (const BadValueCase& c : cases) {
    SCOPED_TRACE(std::string(c.variable) + "=\"" + c.value + "\"");
    clearLines();
    const Config config = parse({{c.variable, c.value}});
    EXPECT_EQ(config.enable, defaults.enable);
    EXPECT_EQ(config.oneShotMaxBytes, defaults.oneShotMaxBytes);
    EXPECT_EQ(config.workspaceMaxBytes, defaults.workspaceMaxBytes);
    EXPECT_EQ(config.timeoutMs, defaults.timeoutMs);
    EXPECT_EQ(config.requireNvlink, defaults.requireNvlink);
    EXPECT_EQ(config.auditDebug, defaults.auditDebug);
    expectOneWarning(c.variable, c.value);
  }
}

TEST_F(ConfigTest, OneBadKnobDoesNotSpoilTheOthers) {
  const Config config = parse({
      {"NCCL_LAMPORT_REQUIRE_NVLINK", "bogus"},
      {"NCCL_LAMPORT_ONESHOT_MAX_BYTES", "256K"},
      {"NCCL_LAMPORT_TIMEOUT_MS", "nope"},
  });
  EXPECT_TRUE(config.requireNvlink);
  EXPECT_EQ(config.oneShotMaxBytes, 256 * kKiB);
  EXPECT_EQ(config.timeoutMs, 600000u);
  EXPECT_EQ(warnings().size(), 2u);
}

TEST_F(ConfigTest, EmptyPathIsTheDefault) {
  EXPECT_EQ(parse({{"NCCL_LAMPORT_NCCL_PATH", ""}}).ncclPath, "");
  EXPECT_TRUE(warnings().empty());
}

TEST_F(ConfigTest, NoWarningPrintedWhenLoggingIsOff) {
  setLogSettingsForTest(LogSettings{});  // NCCL_DEBUG unset
  const Config config = parse({{"NCCL_LAMPORT_REQUIRE_NVLINK", "bogus"}});
  EXPECT_TRUE(config.requireNvlink);
  EXPECT_TRUE(LogCapture::lines().empty());
}

// Issue 10 point 10: the A/B switch never fails open. An unknown value turns the path off, and the
// WARN is printed even with NCCL_DEBUG unset.
TEST_F(ConfigTest, UnknownEnableValueIsOffAndAlwaysWarns) {
  for (const char* bad : {"2", "bogus", "", "enable", "-1", "0n"}) {
    SCOPED_TRACE(std::string("NCCL_LAMPORT_ENABLE=\"") + bad + "\"");
    for (int level : {int{kLogNone}, int{kLogWarn}}) {
      LogSettings settings;
      settings.level = level;
      setLogSettingsForTest(settings);
      clearLines();
      EXPECT_FALSE(parse({{"NCCL_LAMPORT_ENABLE", bad}}).enable);
      const std::vector<std::string> lines = warnings();
      ASSERT_EQ(lines.size(), 1u) << "level " << level;
      EXPECT_NE(lines[0].find(std::string("NCCL_LAMPORT_ENABLE=\"") + bad + "\""), std::string::npos) << lines[0];
      EXPECT_NE(lines[0].find("OFF"), std::string::npos) << lines[0];
    }
  }
}

// Issue 10 point 3: a timeout beyond what the clocks can add (UINT64_MAX meant as "never") is
// clamped to the documented maximum with a WARN, not taken as is.
TEST_F(ConfigTest, TimeoutIsClampedToItsMaximum) {
  EXPECT_EQ(kMaxTimeoutMs, 2592000000u);  // 30 days, as the README says
  // Past 64 bits too (2^64, and a number typed to mean "never"): the longest wait, not the default.
  for (const char* huge : {"99999999999999999999999", "18446744073709551616", "18446744073709551615",
                           "9300000000000", "2592000001"}) {
    SCOPED_TRACE(huge);
    clearLines();
    EXPECT_EQ(parse({{"NCCL_LAMPORT_TIMEOUT_MS", huge}}).timeoutMs, kMaxTimeoutMs);
    const std::vector<std::string> lines = warnings();
    ASSERT_EQ(lines.size(), 1u);
    EXPECT_NE(lines[0].find("maximum 2592000000"), std::string::npos) << lines[0];
  }
  clearLines();
  EXPECT_EQ(parse({{"NCCL_LAMPORT_TIMEOUT_MS", "2592000000"}}).timeoutMs, kMaxTimeoutMs);
  EXPECT_TRUE(warnings().empty());
  // What the clamp protects: the set-up's deadline and the kernel's nanosecond budget stay finite
  // and in the future.
  const auto now = std::chrono::steady_clock::now();
  const auto deadline = now + std::chrono::milliseconds(kMaxTimeoutMs + 1000);
  EXPECT_GT(deadline, now);
  EXPECT_LT(kMaxTimeoutMs * 1000000ull, static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

TEST_F(ConfigTest, KnobTableListsEveryVariable) {
  std::vector<std::string> names;
  for (const KnobInfo& knob : knobTable()) {
    ASSERT_NE(knob.variable, nullptr);
    ASSERT_NE(knob.defaultText, nullptr);
    ASSERT_NE(knob.unit, nullptr);
    EXPECT_EQ(std::string(knob.variable).rfind("NCCL_LAMPORT_", 0), 0u) << knob.variable;
    names.emplace_back(knob.variable);
  }
  for (const char* expected :
       {"NCCL_LAMPORT_ENABLE", "NCCL_LAMPORT_ONESHOT_MAX_BYTES", "NCCL_LAMPORT_TWOSHOT_MAX_BYTES",
        "NCCL_LAMPORT_WORKSPACE_MAX_BYTES", "NCCL_LAMPORT_BASELINE_KERNEL",
        "NCCL_LAMPORT_TIMEOUT_MS", "NCCL_LAMPORT_NCCL_PATH", "NCCL_LAMPORT_REQUIRE_NVLINK"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), expected), names.end()) << expected;
  }
}

}  // namespace
}  // namespace nccl_lamport
