// The object's log lines, captured in a test (common/log.h's test sink) instead of printed, so a
// test can check what a user would read. One LogCapture at a time in a process.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "common/log.h"

namespace nccl_lamport {

class LogCapture {
 public:
  /** From now until destruction, lines at `level` (kLogWarn: WARNs only) go here, not to stderr;
   *  nothing captured before. The destructor restores the default settings (nothing logged). */
  explicit LogCapture(LogLevel level = kLogWarn) {
    clear();
    LogSettings settings;
    settings.level = level;
    setLogSettingsForTest(settings);
    setLogSinkForTest(&LogCapture::sink);
  }
  ~LogCapture() {
    setLogSinkForTest(nullptr);
    setLogSettingsForTest(LogSettings{});
  }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;

  /** Every line captured so far, in order, without its newline. */
  static std::vector<std::string> lines() {
    std::lock_guard<std::mutex> lock(mutex());
    return store();
  }
  /** The captured lines that contain `text`, in order. */
  static std::vector<std::string> linesWith(const std::string& text) {
    std::vector<std::string> found;
    for (const std::string& line : lines()) {
      if (line.find(text) != std::string::npos) found.push_back(line);
    }
    return found;
  }
  static void clear() {
    std::lock_guard<std::mutex> lock(mutex());
    store().clear();
  }

 private:
  static std::mutex& mutex() {
    static std::mutex m;
    return m;
  }
  static std::vector<std::string>& store() {
    static std::vector<std::string> captured;
    return captured;
  }
  static void sink(const char* line) {
    std::lock_guard<std::mutex> lock(mutex());
    store().emplace_back(line);
  }
};

}  // namespace nccl_lamport
