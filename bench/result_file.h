// nccl-lamport-bench's result files (--csv, --json, --tune, --loopback's CSV and JSON). Host code
// only: tests/unit/test_bench_tune.cc covers it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace nccl_lamport::bench {

/**
 * Writes content to path; false with one line on stderr ("could not write the <what> file ...")
 * when it cannot. A regular file (or a new one) is replaced at once: the text goes to a temporary
 * file in the same folder, which is renamed over path only when complete, so a failed write
 * leaves an older file (a tuning file that running jobs read) as it was, never cut short. A file
 * this user may not write is refused (the shell's `>` would refuse it too), not replaced. Other
 * paths (/dev/stdout, a FIFO, a symlink), and files in a folder that takes no new file, are
 * written in place.
 */
bool writeResultFile(const std::string& path, const std::string& content, const char* what);

/**
 * Why `path` cannot take a result file, checked before anything is measured so that a long run
 * does not end in a lost result ("" when it can, as far as can be told without writing): the path
 * is a folder, an existing file this user may not write (it is not replaced behind the user's
 * back), or a new file in a folder that is missing or takes no new file.
 */
std::string resultPathProblem(const std::string& path);

/** Whether two result paths name the same file: equal names in the same folder, links in the
 *  folders resolved ("a" and "./a"). Compared as written where a folder does not exist. */
bool sameResultPath(const std::string& a, const std::string& b);

/** The text of a --json document: 2-space indent, a final newline, each invalid UTF-8 sequence in
 *  its strings (a Latin-1 file name in argv) replaced by U+FFFD, where a plain dump() would throw
 *  after the whole run. */
std::string resultJsonText(const nlohmann::json& doc);

}  // namespace nccl_lamport::bench
