#include "tuner/displaced_tuner.h"

#include <dlfcn.h>
#include <link.h>
#include <pwd.h>
#include <stdlib.h>
#include <strings.h>
#include <unistd.h>

#include <cstring>
#include <mutex>
#include <sstream>
#include <vector>

#include "common/small_file.h"
#include "tuner/tuner_loader_rules.h"

namespace nccl_lamport {

namespace {

/** dlopen, except for a path to something that is not a regular file (a FIFO: dlopen would wait
 *  for a writer for ever, inside NCCL's init). */
void* openLibrary(const std::string& name, int flags) {
  return pathIsNotARegularFile(name) ? nullptr : dlopen(name.c_str(), flags);
}

/** nccl.conf's text; empty when it is missing, unreadable, not a regular file or over 1 MiB (the
 *  reader of every file a user names: it never waits on a FIFO, never reads a huge file whole). */
std::string readConfFile(const std::string& path) {
  std::string text;
  std::string error;
  return readSmallRegularFile(path, size_t{1} << 20, &text, &error) ? text : std::string();
}

bool sameObject(void* handle, const std::string& ourPath) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return false;
  char a[4096], b[4096];
  return realpath(map->l_name, a) != nullptr && realpath(ourPath.c_str(), b) != nullptr && std::string(a) == b;
}

// The object that defines addr (its load base), or null.
const void* objectOf(const void* addr) {
  Dl_info info{};
  return addr != nullptr && dladdr(addr, &info) != 0 ? info.dli_fbase : nullptr;
}

// True when the tuner struct comes from an nccl-lamport object: ours, or another copy of it (a
// site-wide install named in nccl.conf while the environment names a newer build). Chaining a
// copy would run our tuner init twice per communicator, the second hooking the first's exports.
bool isLamport(void* handle, const void* table, const std::string& ourPath) {
  if (sameObject(handle, ourPath)) return true;
  const void* marker = dlsym(handle, "ncclLamportIsActive");  // exported by every nccl-lamport object
  return marker != nullptr && objectOf(marker) == objectOf(table);
}

// The first tuner struct in handle of the versions NCCL accepts (TunerLoaderRules::structVersions,
// in NCCL's order). None, with *ours set, for nccl-lamport itself (isLamport).
DisplacedTuner tableIn(void* handle, const std::vector<int>& versions, const std::string& ourPath, bool* ours) {
  DisplacedTuner found;
  *ours = false;
  if (handle == nullptr) return found;
  for (const int version : versions) {
    if (const void* table = dlsym(handle, ("ncclTunerPlugin_v" + std::to_string(version)).c_str())) {
      *ours = isLamport(handle, table, ourPath);
      if (*ours) return found;
      found.table = table;
      found.abiVersion = version;
      return found;
    }
  }
  *ours = sameObject(handle, ourPath);
  return found;
}

// The home directory NCCL reads ~/.nccl.conf from: $HOME, or before 2.30 the passwd entry's
// (none for a user without one, as in a container run under a bare uid). False: none.
bool homeDirectory(const TunerLoaderRules& rules, std::string* home) {
  if (!rules.homeFromPasswd) {
    const char* env = getenv("HOME");
    if (env != nullptr) *home = env;
    return env != nullptr;
  }
  passwd entry{};
  passwd* result = nullptr;
  std::vector<char> buffer(16384);  // getpwuid_r, not NCCL's getpwuid: other threads may call that meanwhile
  if (getpwuid_r(getuid(), &entry, buffer.data(), buffer.size(), &result) != 0 || result == nullptr ||
      result->pw_dir == nullptr) {
    return false;
  }
  *home = result->pw_dir;
  return true;
}

// NCCL's nccl.conf files, in the order it reads them (src/misc/param.cc): NCCL_CONF_FILE when set,
// not empty and known to that NCCL, else ~/.nccl.conf; then /etc/nccl.conf.
std::vector<std::string> confFiles(const TunerLoaderRules& rules) {
  std::vector<std::string> confs;
  const char* file = rules.confFileVariable ? getenv("NCCL_CONF_FILE") : nullptr;
  std::string home;
  if (file != nullptr && file[0] != '\0') {
    confs.emplace_back(file);
  } else if (homeDirectory(rules, &home)) {
    confs.push_back(home + "/.nccl.conf");
  }
  confs.emplace_back("/etc/nccl.conf");
  return confs;
}

bool isNone(const TunerLoaderRules& rules, const std::string& value) {
  return rules.noneTurnsPluginsOff && strcasecmp(value.c_str(), "none") == 0;
}

// What the tuner loader of the NCCL that called ours through tuner ABI `version` would have done
// without ours (rules: tuner/tuner_loader_rules.h): NCCL_TUNER_PLUGIN as the first nccl.conf
// assignment sets it ("none", where that NCCL knows it: no tuner at all); the named library
// (unset or empty: libnccl-tuner.so), by each name NCCL tries; only when none of those opens,
// the net plugin's. The first library that opens decides: one without a tuner struct NCCL
// accepts means none (NCCL: "unsupported", and no net plugin fallback). nccl-lamport itself (or
// another copy of it: nccl.conf may name ours) counts as not there: what it displaced is next.
DisplacedTuner search(int version, const std::string& ourPath) {
  const TunerLoaderRules rules = tunerLoaderRules(version);
  const int openFlags = (rules.lazyBinding ? RTLD_LAZY : RTLD_NOW) | RTLD_LOCAL;
  std::string value;
  std::string from;
  for (const std::string& conf : confFiles(rules)) {
    if (tunerPluginInConf(readConfFile(conf), &value, rules.stripsCarriageReturn)) {
      from = conf;
      break;
    }
  }
  if (isNone(rules, value)) return DisplacedTuner();
  const std::vector<std::string> names =
      value.empty() ? std::vector<std::string>{"libnccl-tuner.so"}
                    : pluginLibraryNames(value, "nccl-tuner", rules.prefixedNameAlways);
  bool ours = false;
  for (const std::string& name : names) {
    void* handle = openLibrary(name, openFlags);
    if (handle == nullptr) continue;
    DisplacedTuner found = tableIn(handle, rules.structVersions, ourPath, &ours);
    if (found.table == nullptr) {
      dlclose(handle);
      if (ours) break;  // as if it were not there: the net plugin's is next
      return found;
    }
    found.source = value.empty() ? name + ", NCCL's default tuner" : "NCCL_TUNER_PLUGIN=" + value + " in " + from;
    return found;  // the handle stays open while the table is in use: for the process
  }
  // The net plugin's library: opened by name as the tuner loader of 2.21 - 2.25 does, else only
  // the one NCCL's net loader holds (loaded before the tuner; never loaded by us). The first
  // name that opens is the net plugin.
  const char* net = getenv("NCCL_NET_PLUGIN");
  const std::string netValue = net != nullptr && net[0] != '\0' ? net : "";
  if (isNone(rules, netValue)) return DisplacedTuner();
  // From 2.27 the value is a comma-separated list: NCCL loads its plugins in order until one is
  // assigned to the communicator, and the tuner loader takes the net library NCCL opened last,
  // so the last of the list that is loaded. Where NCCL opens the value itself (2.21 - 2.25) it
  // is one name; where it does not, a list element that is loaded is one NCCL loaded (2.26 takes
  // the value as one name and loads none of them).
  std::vector<std::string> netValues;
  if (netValue.empty() || rules.opensNetPluginItself) {
    netValues.push_back(netValue);
  } else {
    std::istringstream elements(netValue);
    std::string element;
    while (std::getline(elements, element, ',')) {
      if (!element.empty()) netValues.push_back(element);  // strtok_r skips empty ones
    }
  }
  void* netHandle = nullptr;
  std::string netName;
  for (const std::string& value : netValues) {
    const std::vector<std::string> netNames =
        value.empty() ? std::vector<std::string>{"libnccl-net.so"}
                      : pluginLibraryNames(value, "nccl-net", rules.prefixedNameAlways);
    for (const std::string& name : netNames) {
      void* handle = openLibrary(name, openFlags | (rules.opensNetPluginItself ? 0 : RTLD_NOLOAD));
      if (handle == nullptr) continue;
      if (netHandle != nullptr) dlclose(netHandle);
      netHandle = handle;
      netName = name;
      break;
    }
  }
  if (netHandle == nullptr) return DisplacedTuner();
  DisplacedTuner found = tableIn(netHandle, rules.structVersions, ourPath, &ours);
  if (found.table == nullptr) {
    dlclose(netHandle);
    return found;
  }
  found.source = "the net plugin " + netName;
  return found;
}

}  // namespace

bool tunerPluginInConf(const std::string& confText, std::string* value, bool stripCarriageReturn) {
  // As NCCL's reader: '\n' (then, from 2.30, '\r') stripped, '#' in column 0 a comment (before
  // 2.26 such a line sets a variable whose name starts with '#': no different for this one), the
  // variable exactly what precedes the first '=', setenv without overwrite (the first wins).
  std::istringstream lines(confText);
  std::string line;
  while (std::getline(lines, line)) {
    if (stripCarriageReturn && !line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || line.compare(0, eq, "NCCL_TUNER_PLUGIN") != 0) continue;
    *value = line.substr(eq + 1);
    // NCCL keeps the value as a C string: it ends at a NUL byte.
    value->resize(strnlen(value->c_str(), value->size()));
    return true;
  }
  return false;
}

std::vector<std::string> pluginLibraryNames(const std::string& value, const char* prefix, bool alwaysPrefixed) {
  std::vector<std::string> names{value};
  const bool libraryName = value.rfind("lib", 0) == 0 && value.size() >= 3 &&
                           value.compare(value.size() - 3, 3, ".so") == 0;
  if (alwaysPrefixed || (value.find('/') == std::string::npos && !libraryName)) {
    names.push_back(std::string("lib") + prefix + "-" + value + ".so");
  }
  return names;
}

DisplacedTuner displacedTuner(int ncclAbiVersion, const std::string& ourPath) {
  static std::mutex mutex;
  static bool searched[8] = {};
  static DisplacedTuner found[8];
  if (ncclAbiVersion < 2 || ncclAbiVersion >= 8) return DisplacedTuner();
  std::lock_guard<std::mutex> lock(mutex);
  if (!searched[ncclAbiVersion]) {
    searched[ncclAbiVersion] = true;
    found[ncclAbiVersion] = search(ncclAbiVersion, ourPath);
  }
  return found[ncclAbiVersion];
}

}  // namespace nccl_lamport
