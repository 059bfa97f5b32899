// CPU tests of nccl-lamport-bench's command line (bench/bench_cli.h): option values, the shared
// byte-size syntax, rejections with exit status 2, and a --help that a person can read.
#include <gtest/gtest.h>

#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "bench/bench_cli.h"

namespace nccl_lamport::bench {
namespace {

struct Parsed {
  int status = 0;
  BenchOptions options;
  std::string out;
  std::string err;
};

Parsed parse(std::vector<std::string> args) {
  args.insert(args.begin(), "nccl-lamport-bench");
  Parsed p;
  std::ostringstream out, err;
  p.status = parseCommandLine(args, &p.options, out, err);
  p.out = out.str();
  p.err = err.str();
  return p;
}

TEST(BenchCli, DefaultsRunTheFullSweep) {
  const Parsed p = parse({});
  EXPECT_EQ(p.status, -1);
  EXPECT_EQ(p.options.minBytes, 8u);
  EXPECT_EQ(p.options.maxBytes, size_t{16} << 20);
  EXPECT_TRUE(p.options.check);
  EXPECT_TRUE(p.options.symmetric);
  EXPECT_FALSE(p.options.quiet);
  EXPECT_EQ(p.options.mode, TimingMode::kBoth);
  EXPECT_TRUE(p.options.tunePath.empty());
}

TEST(BenchCli, ByteSizesTakeTheKnobSyntax) {
  const Parsed p = parse({"--min-bytes", "64KiB", "--max-bytes=8M"});
  ASSERT_EQ(p.status, -1) << p.err;
  EXPECT_EQ(p.options.minBytes, 65536u);
  EXPECT_EQ(p.options.maxBytes, size_t{8} << 20);
  const Parsed q = parse({"-b", "2k", "-e", "1G"});
  ASSERT_EQ(q.status, -1) << q.err;
  EXPECT_EQ(q.options.minBytes, 2048u);
  EXPECT_EQ(q.options.maxBytes, size_t{1} << 30);
}

TEST(BenchCli, BadValuesExitWithStatus2AndNameTheOption) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--min-bytes", "1.5K"}, {"--max-bytes", "lots"}, {"--dtype", "int8"},
        {"--op", "max"}, {"--mode", "sometimes"}, {"--gpus", "-1"}, {"--loopback", "9"},
        {"--no-such-option"}, {"--tune", "t.json", "--loopback", "2"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, kExitUsage) << args[0];
    EXPECT_FALSE(p.err.empty()) << args[0];
  }
  EXPECT_NE(parse({"--dtype", "int8"}).err.find("--dtype"), std::string::npos);
}

TEST(BenchCli, OnOffFlagsHaveOneSpelling) {
  EXPECT_FALSE(parse({"--no-check"}).options.check);
  EXPECT_FALSE(parse({"--no-symmetric"}).options.symmetric);
  EXPECT_TRUE(parse({"--quiet"}).options.quiet);
  // The old double spelling is gone: --check is not an option any more.
  EXPECT_EQ(parse({"--check"}).status, kExitUsage);
}

TEST(BenchCli, TuneAndLoopback) {
  const Parsed p = parse({"--tune", "/tmp/t.json"});
  ASSERT_EQ(p.status, -1);
  EXPECT_EQ(p.options.tunePath, "/tmp/t.json");
  const Parsed l = parse({"--loopback", "4"});
  ASSERT_EQ(l.status, -1);
  EXPECT_EQ(l.options.loopback, 4);
  EXPECT_EQ(l.options.graphCalls, 50);  // chains of 50 (SPEC 8) unless given
  EXPECT_EQ(parse({"--loopback", "4", "--graph-calls", "7"}).options.graphCalls, 7);
}

// Values CLI11 lets through but that are not what the user typed: exit 2 like other bad options.
TEST(BenchCli, OutOfRangeSeedsAndANanTimeoutAreRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--seed", "-1"}, {"--seed", "18446744073709551616"},
        {"--seed", "99999999999999999999999"}, {"--timeout", "nan"}, {"--timeout=-nan"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, kExitUsage) << args[0] << " " << args.back() << ": seed " << p.options.seed
                                    << ", timeout " << p.options.timeoutSeconds;
    EXPECT_FALSE(p.err.empty()) << args.back();
  }
  const Parsed top = parse({"--seed", "18446744073709551615"});
  ASSERT_EQ(top.status, -1) << top.err;
  EXPECT_EQ(top.options.seed, 18446744073709551615ull);
  EXPECT_EQ(parse({"--seed", "42"}).options.seed, 42u);
  EXPECT_EQ(parse({"--timeout", "30"}).options.timeoutSeconds, 30.0);
}

// A file the plugin would reject (nRanks 1), or options that would be dropped without a word.
TEST(BenchCli, CombinationsThatWouldDoSomethingElseThanAskedAreRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--tune", "t.json", "--gpus", "1"},
        {"--tune", "t.json", "--csv", "t.csv"},    // runTune writes no CSV
        {"--tune", "t.json", "--json", "r.json"},  // nor JSON
        {"--tune", "t.json", "--plot", "r.png"},   // nor a plot
        {"--loopback", "2", "--plot", "r.png"},    // the loopback run draws nothing
        {"--csv", "same", "--json", "same"},       // the JSON would replace the CSV
        {"--json", "r.json", "--plot", "r.json"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, kExitUsage) << args[0] << " " << args[2];
    EXPECT_FALSE(p.err.empty()) << args[2];
  }
  EXPECT_EQ(parse({"--tune", "t.json", "--gpus", "2"}).status, -1);
  EXPECT_EQ(parse({"--loopback", "2", "--csv", "l.csv", "--json", "l.json"}).status, -1);
  EXPECT_EQ(parse({"--csv", "r.csv", "--json", "r.json", "--plot", "r.png"}).status, -1);
}

// A result path that cannot be written is refused before anything is measured (a --tune run of
// minutes lost its crossovers that way), and "a" and "./a" are the same file.
TEST(BenchCli, OutputPathsThatCannotBeWrittenAreRefusedBeforeTheRun) {
  struct Case {
    std::vector<std::string> args;
    const char* said;  // in the error line
  };
  for (const Case& c : {Case{{"--tune", "/nonexistent-lamport-dir/t.json"}, "folder /nonexistent-lamport-dir"},
                        Case{{"--csv", "/nonexistent-lamport-dir/r.csv"}, "--csv /nonexistent-lamport-dir/r.csv"},
                        Case{{"--json", "/tmp"}, "is a folder"},
                        Case{{"--loopback", "2", "--json", "/nonexistent-lamport-dir/l.json"}, "--json"},
                        Case{{"--csv", "same.csv", "--json", "./same.csv"}, "name the same file"}}) {
    const Parsed p = parse(c.args);
    EXPECT_EQ(p.status, kExitUsage) << c.said;
    EXPECT_NE(p.err.find(c.said), std::string::npos) << p.err;
  }
  EXPECT_EQ(parse({"--csv", "/dev/stdout"}).status, -1) << "a device file is written in place";
  EXPECT_EQ(parse({"--tune", "/tmp/lamport-cli-test-new.json"}).status, -1) << "a new file in a writable folder";
}

// --loopback runs in this process on GPU 0 with its own per-call kernel timeout: --gpus, --timeout
// and --no-symmetric would be dropped without a word (a --timeout 60 run could still take hours).
TEST(BenchCli, OptionsLoopbackWouldIgnoreAreRefused) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--loopback", "2", "--gpus", "4"}, {"--loopback", "2", "-g", "0"},
        {"--loopback", "4", "--timeout", "60"}, {"--loopback", "2", "--no-symmetric"}}) {
    const Parsed p = parse(args);
    EXPECT_EQ(p.status, kExitUsage) << args[2];
    EXPECT_NE(p.err.find("--loopback"), std::string::npos) << args[2] << ": " << p.err;
  }
  EXPECT_EQ(parse({"--loopback", "2", "--verbose", "--no-check", "--seed", "7"}).status, -1);
}

TEST(BenchCli, HelpExitsZeroOnStdout) {
  const Parsed p = parse({"--help"});
  EXPECT_EQ(p.status, kExitOk);
  EXPECT_NE(p.out.find("--max-bytes"), std::string::npos);
  EXPECT_TRUE(p.err.empty());
}

TEST(BenchCli, HelpIsReadable) {
  const std::string help = helpText();
  // 92 columns at most (the width the option descriptions are wrapped to).
  std::istringstream helpLines(help);
  for (std::string line; std::getline(helpLines, line);) EXPECT_LE(line.size(), 92u) << line;
  // No CLI11 type placeholders such as INT:INT, INT or FLOAT: every value is named for its unit.
  EXPECT_FALSE(std::regex_search(help, std::regex(R"(\b(INT|UINT|FLOAT|TEXT)\b)"))) << help;
  EXPECT_EQ(help.find("INT:INT"), std::string::npos);
  // One spelling per on/off flag: no "--check" next to "--no-check".
  EXPECT_EQ(help.find("--check"), std::string::npos);
  // Units, the size syntax and the exit statuses are in the text.
  for (const char* needle : {"SIZE", "64KiB", "CALLS", "SECONDS", "microseconds", "Exit status",
                             "  0  ", "  1  ", "  2  ", "--tune", "--plot", "--loopback", "stderr"}) {
    EXPECT_NE(help.find(needle), std::string::npos) << needle;
  }
  // A person reads it at once: no line wider than a terminal.
  std::istringstream lines(help);
  std::string line;
  while (std::getline(lines, line)) EXPECT_LE(line.size(), 120u) << line;
}

}  // namespace
}  // namespace nccl_lamport::bench
