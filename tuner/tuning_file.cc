#include "tuner/tuning_file.h"

#include <nlohmann/json.hpp>

#include "common/log.h"
#include "common/small_file.h"
#include "kernels/lamport_layout.h"

namespace nccl_lamport {

namespace {

using nlohmann::json;

bool getSize(const json& doc, const char* key, size_t* out, std::string* error) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_unsigned()) {
    *error = std::string("\"") + key + "\" must be a non-negative whole number of bytes";
    return false;
  }
  *out = it->get<size_t>();
  return true;
}

bool getInt(const json& doc, const char* key, int minimum, int* out, std::string* error) {
  const auto it = doc.find(key);
  if (it == doc.end() || !it->is_number_integer() || it->get<long long>() < minimum ||
      it->get<long long>() > 1000000) {
    *error = std::string("\"") + key + "\" must be a whole number >= " + std::to_string(minimum);
    return false;
  }
  *out = static_cast<int>(it->get<long long>());
  return true;
}

std::string getText(const json& doc, const char* key) {
  const auto it = doc.find(key);
  return it != doc.end() && it->is_string() ? it->get<std::string>() : std::string();
}

}  // namespace

bool parseTuningFile(const std::string& text, TuningEntry* out, std::string* error) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    *error = "not valid JSON";
    return false;
  }
  if (!doc.is_object()) {
    *error = "not a JSON object";
    return false;
  }
  int version = 0;
  if (!getInt(doc, "version", 1, &version, error)) return false;
  if (version != kTuningFileVersion) {
    *error = "format version " + std::to_string(version) + ", this build reads version " +
             std::to_string(kTuningFileVersion);
    return false;
  }
  TuningEntry entry;
  if (!getInt(doc, "nRanks", 2, &entry.nRanks, error)) return false;
  if (!getInt(doc, "smArch", 1, &entry.smArch, error)) return false;
  if (!getSize(doc, "oneShotMaxBytes", &entry.oneShotMaxBytes, error)) return false;
  if (!getSize(doc, "twoShotMaxBytes", &entry.twoShotMaxBytes, error)) return false;
  entry.ncclVersion = getText(doc, "ncclVersion");
  entry.date = getText(doc, "date");
  entry.command = getText(doc, "command");
  *out = entry;
  return true;
}

std::string formatTuningFile(const TuningEntry& entry) {
  const json doc = {{"version", kTuningFileVersion},
                    {"nRanks", entry.nRanks},
                    {"smArch", entry.smArch},
                    {"oneShotMaxBytes", entry.oneShotMaxBytes},
                    {"twoShotMaxBytes", entry.twoShotMaxBytes},
                    {"ncclVersion", entry.ncclVersion},
                    {"date", entry.date},
                    {"command", entry.command}};
  return doc.dump(2) + "\n";
}

CrossoverOverrides crossoverOverrides(const std::string& tuningPath, int nRanks, int smArch,
                                      size_t envOneShot, size_t envTwoShot) {
  CrossoverOverrides result{envOneShot, envTwoShot};
  if (tuningPath.empty() || (envOneShot != 0 && envTwoShot != 0)) return result;
  std::string text;
  TuningEntry entry;
  std::string error;
  if (readSmallRegularFile(tuningPath, kTuningFileMaxBytes, &text, &error) &&
      parseTuningFile(text, &entry, &error) && (entry.nRanks != nRanks || entry.smArch != smArch)) {
    error = "measured for " + std::to_string(entry.nRanks) + " ranks of sm_" + std::to_string(entry.smArch) +
            ", this communicator has " + std::to_string(nRanks) + " ranks of sm_" + std::to_string(smArch);
  }
  if (!error.empty()) {
    LAMPORT_WARN("NCCL_LAMPORT_TUNING_FILE=%s %s: using the built-in crossovers", tuningPath.c_str(),
                 error.c_str());
    return result;
  }
  // 0 in the file: the one-shot never won there; the smallest slot (one 16-byte vector) is the
  // least the set-up can allocate, so messages of up to 16 bytes still take it.
  if (result.oneShotMaxBytes == 0) {
    result.oneShotMaxBytes = entry.oneShotMaxBytes != 0 ? entry.oneShotMaxBytes : kLamportVectorBytes;
  }
  if (result.twoShotMaxBytes == 0) result.twoShotMaxBytes = entry.twoShotMaxBytes;
  // The file's values as written, then what is taken (a *_MAX_BYTES knob wins over the file).
  LAMPORT_INFO(kSubsysInit | kSubsysEnv,
               "NCCL_LAMPORT_TUNING_FILE=%s: %d ranks sm_%d, measured %s: one-shot up to %zu bytes, two-shot up to "
               "%zu bytes; taken: one-shot up to %zu bytes%s, two-shot up to %zu bytes%s (before rounding up to "
               "16-byte multiples and the workspace clamp)",
               tuningPath.c_str(), nRanks, smArch, entry.date.empty() ? "on an unknown date" : entry.date.c_str(),
               entry.oneShotMaxBytes, entry.twoShotMaxBytes, result.oneShotMaxBytes,
               envOneShot != 0 ? " (NCCL_LAMPORT_ONESHOT_MAX_BYTES)" : "", result.twoShotMaxBytes,
               envTwoShot != 0 ? " (NCCL_LAMPORT_TWOSHOT_MAX_BYTES)" : "");
  return result;
}

}  // namespace nccl_lamport
