// Logging (common/log.h): NCCL_DEBUG / NCCL_DEBUG_SUBSYS parsing, the cheap enable test, our
// own NCCL-format lines, and routing through NCCL's logger once NCCL provides it.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <regex>
#include <string>
#include <vector>

#include "common/log.h"

namespace nccl_lamport {
namespace {

std::mutex gMutex;
std::vector<std::string> gSinkLines;

struct NcclLine {
  int level;
  unsigned long flags;
  std::string file;
  int line;
  std::string text;
};
std::vector<NcclLine> gNcclLines;

void captureSink(const char* line) {
  std::lock_guard<std::mutex> lock(gMutex);
  gSinkLines.emplace_back(line);
}

void mockNcclLogger(int level, unsigned long flags, const char* file, int line, const char* fmt,
                    ...) {
  char buffer[2048];
  va_list args;
  va_start(args, fmt);
  vsnprintf(buffer, sizeof(buffer), fmt, args);
  va_end(args);
  std::lock_guard<std::mutex> lock(gMutex);
  gNcclLines.push_back({level, flags, file ? file : "", line, buffer});
}

LogSettings settingsOf(int level, uint64_t mask) {
  LogSettings settings;
  settings.level = level;
  settings.subsysMask = mask;
  return settings;
}

class LogTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setTimestampSettingsForTest(TimestampSettings{});  // NCCL's defaults, whatever the environment says
    std::lock_guard<std::mutex> lock(gMutex);
    gSinkLines.clear();
    gNcclLines.clear();
  }
  void TearDown() override {
    setNcclLogger(nullptr);
    setLogSinkForTest(nullptr);
    setLogDevice(-1);
    setLogDeviceQuery(nullptr);
    setTimestampSettingsForTest(TimestampSettings{});
    setLogSettingsForTest(LogSettings{});
  }
  static std::vector<std::string> sinkLines() {
    std::lock_guard<std::mutex> lock(gMutex);
    return gSinkLines;
  }
  static std::vector<NcclLine> ncclLines() {
    std::lock_guard<std::mutex> lock(gMutex);
    return gNcclLines;
  }
};

constexpr uint64_t kDefaultMask = kSubsysInit | kSubsysEnv | 0x1000;  // INIT, ENV, BOOTSTRAP

// ---- NCCL_DEBUG -------------------------------------------------------------------------------

TEST_F(LogTest, LevelsInAnyCase) {
  EXPECT_EQ(parseLogSettings(nullptr, nullptr).level, kLogNone);
  EXPECT_EQ(parseLogSettings("", nullptr).level, kLogNone);
  EXPECT_EQ(parseLogSettings("VERSION", nullptr).level, kLogVersion);
  EXPECT_EQ(parseLogSettings("WARN", nullptr).level, kLogWarn);
  EXPECT_EQ(parseLogSettings("warn", nullptr).level, kLogWarn);
  EXPECT_EQ(parseLogSettings("INFO", nullptr).level, kLogInfo);
  EXPECT_EQ(parseLogSettings("info", nullptr).level, kLogInfo);
  EXPECT_EQ(parseLogSettings("Info", nullptr).level, kLogInfo);
  EXPECT_EQ(parseLogSettings("ABORT", nullptr).level, kLogAbort);
  EXPECT_EQ(parseLogSettings("TRACE", nullptr).level, kLogTrace);
  EXPECT_EQ(parseLogSettings("tRaCe", nullptr).level, kLogTrace);
  EXPECT_EQ(parseLogSettings("DEBUG", nullptr).level, kLogNone);
  EXPECT_EQ(parseLogSettings("INFO ", nullptr).level, kLogNone);
  EXPECT_EQ(parseLogSettings("3", nullptr).level, kLogNone);
}

// ---- NCCL_DEBUG_SUBSYS ------------------------------------------------------------------------

TEST_F(LogTest, SubsystemLists) {
  EXPECT_EQ(parseLogSettings("INFO", nullptr).subsysMask, kDefaultMask);
  EXPECT_EQ(parseLogSettings("INFO", "").subsysMask, 0u) << "set but empty: no subsystem, as in NCCL";
  EXPECT_EQ(parseLogSettings("INFO", "^").subsysMask, ~uint64_t{0}) << "every subsystem";
  EXPECT_EQ(parseLogSettings("INFO", "INIT").subsysMask, kSubsysInit);
  EXPECT_EQ(parseLogSettings("INFO", "tuning").subsysMask, kSubsysTuning);
  EXPECT_EQ(parseLogSettings("INFO", "INIT,COLL").subsysMask, kSubsysInit | kSubsysColl);
  EXPECT_EQ(parseLogSettings("INFO", "Init,Tuning,ENV,alloc").subsysMask,
            kSubsysInit | kSubsysTuning | kSubsysEnv | kSubsysAlloc);
  EXPECT_EQ(parseLogSettings("INFO", "P2P,SHM,NET,GRAPH").subsysMask, 0x4u | 0x8u | 0x10u | 0x20u);
  EXPECT_EQ(parseLogSettings("INFO", "CALL,PROXY,NVLS,BOOTSTRAP,REG,PROFILE,RAS").subsysMask,
            0x200u | 0x400u | 0x800u | 0x1000u | 0x2000u | 0x4000u | 0x8000u);
  // Unknown names and empty items add nothing.
  EXPECT_EQ(parseLogSettings("INFO", "INIT,,BOGUS,").subsysMask, kSubsysInit);
  EXPECT_EQ(parseLogSettings("INFO", "BOGUS").subsysMask, 0u);
}

TEST_F(LogTest, InversionAndAll) {
  EXPECT_EQ(parseLogSettings("INFO", "ALL").subsysMask, kSubsysAll);
  EXPECT_EQ(parseLogSettings("INFO", "all").subsysMask, kSubsysAll);
  EXPECT_EQ(parseLogSettings("INFO", "^INIT").subsysMask, ~uint64_t{kSubsysInit});
  EXPECT_EQ(parseLogSettings("INFO", "^INIT,COLL").subsysMask,
            ~uint64_t{kSubsysInit | kSubsysColl});
  EXPECT_EQ(parseLogSettings("INFO", "^ALL").subsysMask, 0u);
  EXPECT_EQ(parseLogSettings("INFO", "^").subsysMask, kSubsysAll);
}

// ---- logEnabled -------------------------------------------------------------------------------

TEST_F(LogTest, LogEnabledFollowsLevelAndSubsystem) {
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysTuning));
  EXPECT_TRUE(logEnabled(kLogInfo, kSubsysTuning));
  EXPECT_TRUE(logEnabled(kLogInfo, kSubsysTuning | kSubsysInit));
  EXPECT_FALSE(logEnabled(kLogInfo, kSubsysInit));
  EXPECT_FALSE(logEnabled(kLogTrace, kSubsysTuning));
  // WARN and VERSION count for every subsystem, as NCCL's (NCCL_ALL): any mask but an empty one.
  EXPECT_TRUE(logEnabled(kLogWarn, kSubsysInit));
  EXPECT_TRUE(logEnabled(kLogWarn, kSubsysAll));
  setLogSettingsForTest(settingsOf(kLogInfo, 0));  // NCCL_DEBUG_SUBSYS="" or "^ALL"
  EXPECT_FALSE(logEnabled(kLogWarn, kSubsysAll)) << "NCCL prints no WARN with an empty mask";
  EXPECT_FALSE(logEnabled(kLogInfo, kSubsysInit));
  EXPECT_FALSE(logEnabled(kLogVersion, kSubsysInit)) << "nor a VERSION line";

  setLogSettingsForTest(settingsOf(kLogNone, kSubsysAll));
  EXPECT_FALSE(logEnabled(kLogWarn, kSubsysAll));
  EXPECT_FALSE(logEnabled(kLogInfo, kSubsysAll));

  setLogSettingsForTest(settingsOf(kLogTrace, kSubsysAll));
  EXPECT_TRUE(logEnabled(kLogTrace, kSubsysColl));
  EXPECT_TRUE(logEnabled(kLogInfo, kSubsysP2p));
}

TEST_F(LogTest, DisabledMessagesAreNotFormatted) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogWarn, kSubsysAll));
  int evaluated = 0;
  LAMPORT_INFO(kSubsysInit, "never %d", ++evaluated);
  LAMPORT_TRACE(kSubsysInit, "never %d", ++evaluated);
  EXPECT_EQ(evaluated, 0);
  EXPECT_TRUE(sinkLines().empty());
}

// ---- our own printer ---------------------------------------------------------------------------

TEST_F(LogTest, InfoLineFormat) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  LAMPORT_INFO(kSubsysInit, "hello %d %s", 42, "world");
  const std::vector<std::string> lines = sinkLines();
  ASSERT_EQ(lines.size(), 1u);
  // host:pid:tid [dev] NCCL INFO Lamport: message
  const std::regex format(R"(^[^:\s]+:[0-9]+:[0-9]+ \[-1\] NCCL INFO Lamport: hello 42 world\n$)");
  EXPECT_TRUE(std::regex_match(lines[0], format)) << lines[0];
  const std::string pidField = ":" + std::to_string(getpid()) + ":";
  EXPECT_NE(lines[0].find(pidField), std::string::npos) << lines[0];
}

TEST_F(LogTest, DeviceField) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setLogDevice(3);
  LAMPORT_INFO(kSubsysColl, "on device");
  ASSERT_EQ(sinkLines().size(), 1u);
  EXPECT_NE(sinkLines()[0].find(" [3] NCCL INFO Lamport: on device\n"), std::string::npos)
      << sinkLines()[0];
}

TEST_F(LogTest, WarnLineCarriesFileAndLine) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogWarn, kSubsysInit));
  const int line = __LINE__ + 1;
  LAMPORT_WARN("bad value %s", "x");
  const std::vector<std::string> lines = sinkLines();
  ASSERT_EQ(lines.size(), 1u);
  const std::string expectedTail =
      " test_log.cc:" + std::to_string(line) + " NCCL WARN Lamport: bad value x\n";
  ASSERT_GE(lines[0].size(), expectedTail.size());
  EXPECT_EQ(lines[0].substr(lines[0].size() - expectedTail.size()), expectedTail) << lines[0];
  // As NCCL 2.28+ prints a WARN by default: a blank line, then "[YYYY-MM-DD HH:MM:SS] host:pid:tid".
  EXPECT_TRUE(std::regex_search(
      lines[0], std::regex(R"(^\n\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9]{2}:[0-9]{2}:[0-9]{2}\] [^:\s]+:[0-9]+:[0-9]+ \[-1\] )")))
      << lines[0];
}

TEST_F(LogTest, TimestampLevelsFollowNcclDebugTimestampLevels) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setTimestampSettingsForTest(parseTimestampSettings("info", "<%Y>_"));
  LAMPORT_INFO(kSubsysInit, "stamped");
  LAMPORT_WARN("not stamped");
  const std::vector<std::string> lines = sinkLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_TRUE(std::regex_search(lines[0], std::regex(R"(^<[0-9]{4}> [^:\s]+:[0-9]+:[0-9]+ \[-1\] NCCL INFO)"))) << lines[0];
  EXPECT_TRUE(std::regex_search(lines[1], std::regex(R"(^\n[^:\s<]+:[0-9]+:[0-9]+ \[-1\] )"))) << lines[1];
}

TEST_F(LogTest, TimestampSettingsParse) {
  const TimestampSettings defaults = parseTimestampSettings(nullptr, nullptr);
  EXPECT_EQ(defaults.levels, 1u << kLogWarn);
  EXPECT_EQ(defaults.format, "[%F %T] ");
  EXPECT_EQ(parseTimestampSettings("WARN,trace", nullptr).levels, (1u << kLogWarn) | (1u << kLogTrace));
  EXPECT_EQ(parseTimestampSettings("ALL", nullptr).levels,
            (1u << kLogVersion) | (1u << kLogWarn) | (1u << kLogInfo) | (1u << kLogAbort) | (1u << kLogTrace));
  EXPECT_EQ(parseTimestampSettings("", nullptr).levels, 0u);
  EXPECT_EQ(parseTimestampSettings(nullptr, "[%T]_x_").format, "[%T] x ");
}

// NCCL 2.28's NCCL_DEBUG_TIMESTAMP_LEVELS takes a leading '^' as NCCL_DEBUG_SUBSYS does: every
// level but those listed.
TEST_F(LogTest, TimestampLevelsInversion) {
  const uint32_t all =
      (1u << kLogVersion) | (1u << kLogWarn) | (1u << kLogInfo) | (1u << kLogAbort) | (1u << kLogTrace);
  EXPECT_EQ(parseTimestampSettings("^INFO", nullptr).levels & all, all & ~(1u << kLogInfo));
  EXPECT_EQ(parseTimestampSettings("^warn,trace", nullptr).levels & all,
            all & ~((1u << kLogWarn) | (1u << kLogTrace)));
  EXPECT_EQ(parseTimestampSettings("^ALL", nullptr).levels & all, 0u);
  EXPECT_EQ(parseTimestampSettings("^", nullptr).levels & all, all);
}

TEST_F(LogTest, TimestampFractionsAndStrftime) {
  EXPECT_EQ(formatTimestamp("%3f|%6f|%%|%9f|%1f", 1700000000, 123456789), "123|123456|%|123456789|1");
  EXPECT_EQ(formatTimestamp("%s.%2f ", 1700000000, 50000000), "1700000000.05 ");
  EXPECT_EQ(formatTimestamp("", 1700000000, 0), "");
}

TEST_F(LogTest, DeviceQueryFillsAnUnknownDevice) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setLogDeviceQuery([] { return 5; });
  LAMPORT_INFO(kSubsysInit, "queried");
  setLogDevice(2);
  LAMPORT_INFO(kSubsysInit, "set");
  const std::vector<std::string> lines = sinkLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find(" [5] NCCL INFO Lamport: queried\n"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find(" [2] NCCL INFO Lamport: set\n"), std::string::npos) << lines[1];
}

TEST_F(LogTest, WarnAlwaysIsPrintedWithoutNcclDebug) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogNone, 0));
  LAMPORT_WARN("hidden");
  LAMPORT_WARN_ALWAYS("shown %d", 1);
  const std::vector<std::string> lines = sinkLines();
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_NE(lines[0].find(" NCCL WARN Lamport: shown 1\n"), std::string::npos) << lines[0];
}

TEST_F(LogTest, TraceLineFormat) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogTrace, kSubsysTuning));
  LAMPORT_TRACE(kSubsysTuning, "per call");
  ASSERT_EQ(sinkLines().size(), 1u);
  // NCCL's TRACE: "[dev] <ms since logging started> file:line NCCL TRACE".
  EXPECT_TRUE(std::regex_search(sinkLines()[0],
                                std::regex(R"( \[-1\] [0-9]+\.[0-9]+ test_log\.cc:[0-9]+ NCCL TRACE Lamport: per call\n$)")))
      << sinkLines()[0];
}

TEST_F(LogTest, LongMessagesAreTruncatedNotOverflowed) {
  setLogSinkForTest(captureSink);
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  const std::string huge(5000, 'x');
  LAMPORT_INFO(kSubsysInit, "%s", huge.c_str());
  ASSERT_EQ(sinkLines().size(), 1u);
  EXPECT_LT(sinkLines()[0].size(), 2000u);
}

// ---- NCCL's logger -----------------------------------------------------------------------------

TEST_F(LogTest, RoutesThroughNcclsLoggerOnceSet) {
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setNcclLogger(mockNcclLogger);
  const int line = __LINE__ + 1;
  LAMPORT_INFO(kSubsysTuning, "via nccl %d", 7);
  LAMPORT_WARN("warned");
  const std::vector<NcclLine> lines = ncclLines();
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, kLogInfo);
  EXPECT_EQ(lines[0].flags, static_cast<unsigned long>(kSubsysTuning));
  EXPECT_EQ(lines[0].text, "Lamport: via nccl 7");
  EXPECT_EQ(lines[0].line, line);
  EXPECT_NE(lines[0].file.find("test_log.cc"), std::string::npos);
  EXPECT_EQ(lines[1].level, kLogWarn);
  EXPECT_EQ(lines[1].text, "Lamport: warned");
  EXPECT_TRUE(sinkLines().empty());
}

TEST_F(LogTest, OurLevelTestStillAppliesWithNcclsLogger) {
  setLogSettingsForTest(settingsOf(kLogWarn, kSubsysAll));
  setNcclLogger(mockNcclLogger);
  LAMPORT_INFO(kSubsysTuning, "filtered");
  EXPECT_TRUE(ncclLines().empty());
}

TEST_F(LogTest, ResettingTheLoggerReturnsToOurPrinter) {
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setNcclLogger(mockNcclLogger);
  setNcclLogger(nullptr);
  setLogSinkForTest(captureSink);
  LAMPORT_INFO(kSubsysInit, "ours again");
  EXPECT_TRUE(ncclLines().empty());
  ASSERT_EQ(sinkLines().size(), 1u);
  EXPECT_NE(sinkLines()[0].find("NCCL INFO Lamport: ours again"), std::string::npos);
}

TEST_F(LogTest, TestSinkWinsOverNcclsLogger) {
  setLogSettingsForTest(settingsOf(kLogInfo, kSubsysAll));
  setNcclLogger(mockNcclLogger);
  setLogSinkForTest(captureSink);
  LAMPORT_INFO(kSubsysInit, "to the sink");
  EXPECT_TRUE(ncclLines().empty());
  EXPECT_EQ(sinkLines().size(), 1u);
}

}  // namespace
}  // namespace nccl_lamport
