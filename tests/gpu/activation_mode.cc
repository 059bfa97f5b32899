#include "tests/gpu/activation_mode.h"

#include <cstdlib>
#include <cstring>

namespace nccl_lamport {
namespace gputest {
namespace {

/** The first entry of a list (LD_PRELOAD: separated by spaces or colons; LD_AUDIT: colons) whose
 *  file name contains "nccl-lamport" (libnccl-lamport.so, its -audit and -tuner- names). */
std::string lamportEntry(const char* list) {
  if (list == nullptr) return "";
  const char* p = list;
  while (*p != '\0') {
    while (*p == ' ' || *p == ':' || *p == '\t') ++p;
    const char* end = p;
    while (*end != '\0' && *end != ' ' && *end != ':' && *end != '\t') ++end;
    const std::string entry(p, end);
    const size_t slash = entry.rfind('/');
    const std::string name = slash == std::string::npos ? entry : entry.substr(slash + 1);
    if (name.find("nccl-lamport") != std::string::npos || name.find("nccl-tuner-lamport") != std::string::npos) {
      return entry;
    }
    p = end;
  }
  return "";
}

}  // namespace

std::string tunerActivationEnvProblem(const char* tunerPlugin, const char* ldPreload, const char* ldAudit) {
  if (tunerPlugin == nullptr || tunerPlugin[0] == '\0') {
    return "NCCL_TUNER_PLUGIN is not set: this executable tests tuner activation (SPEC 4a) and needs "
           "NCCL_TUNER_PLUGIN=/abs/path/libnccl-tuner-lamport.so";
  }
  if (tunerPlugin[0] != '/') {
    return std::string("NCCL_TUNER_PLUGIN=") + tunerPlugin +
           " is not an absolute path: the tests find the extension API by dlopen(NCCL_TUNER_PLUGIN, "
           "RTLD_NOLOAD), which needs the name NCCL opened";
  }
  const std::string preloaded = lamportEntry(ldPreload);
  if (!preloaded.empty()) {
    return "LD_PRELOAD names " + preloaded + ": the interposer would run before the tuner's init, so this "
           "would not test tuner activation (unset LD_PRELOAD)";
  }
  const std::string audited = lamportEntry(ldAudit);
  if (!audited.empty()) {
    return "LD_AUDIT names " + audited + ": it redirects libnccl to the interposer, so this would not test "
           "tuner activation (unset LD_AUDIT)";
  }
  return "";
}

std::string tunerActivationEnvProblem() {
  return tunerActivationEnvProblem(getenv("NCCL_TUNER_PLUGIN"), getenv("LD_PRELOAD"), getenv("LD_AUDIT"));
}

}  // namespace gputest
}  // namespace nccl_lamport
