#include "tuner/displaced_tuner.h"

#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>

#include <mutex>
#include <sstream>
#include <vector>

#include "common/small_file.h"

namespace nccl_lamport {

namespace {

/** nccl.conf's text; empty when it is missing, unreadable, not a regular file or over 1 MiB (the
 *  reader of every file a user names: it never waits on a FIFO, never reads a huge file whole). */
std::string readConfFile(const std::string& path) {
  std::string text;
  std::string error;
  return readSmallRegularFile(path, size_t{1} << 20, &text, &error) ? text : std::string();
}

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string::npos) return std::string();
  return s.substr(b, s.find_last_not_of(" \t\r") - b + 1);
}

// The library names NCCL tries for a plugin value (src/plugin/plugin_open.cc): as given, then
// lib<prefix>-<value>.so when the value has no '/' and is not already a lib*.so name.
std::vector<std::string> pluginNames(const std::string& value, const char* prefix) {
  std::vector<std::string> names{value};
  if (value.find('/') == std::string::npos && value.rfind("lib", 0) != 0) {
    names.push_back(std::string("lib") + prefix + "-" + value + ".so");
  }
  return names;
}

bool sameObject(void* handle, const std::string& ourPath) {
  link_map* map = nullptr;
  if (handle == nullptr || dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr) return false;
  char a[4096], b[4096];
  return realpath(map->l_name, a) != nullptr && realpath(ourPath.c_str(), b) != nullptr && std::string(a) == b;
}

// The tuner struct in handle that a communicator set up through ncclAbiVersion can use: that
// version's, else the newest older one whose init needs nothing NCCL's v5+ init alone gives
// (v4, v3, v2). Not v5/v6 under a newer NCCL: their init takes NCCL's model constants in a layout
// that differs from v7's.
DisplacedTuner tableIn(void* handle, int ncclAbiVersion, const std::string& ourPath) {
  DisplacedTuner found;
  if (handle == nullptr || sameObject(handle, ourPath)) return found;
  for (const int version : {ncclAbiVersion, 4, 3, 2}) {
    if (const void* table = dlsym(handle, ("ncclTunerPlugin_v" + std::to_string(version)).c_str())) {
      found.table = table;
      found.abiVersion = version;
      return found;
    }
  }
  return found;
}

DisplacedTuner search(int version, const std::string& ourPath) {
  // (a) nccl.conf's tuner, overridden by the environment's (ours).
  std::vector<std::string> confs;
  if (const char* f = getenv("NCCL_CONF_FILE")) confs.emplace_back(f);
  if (const char* home = getenv("HOME")) confs.push_back(std::string(home) + "/.nccl.conf");
  confs.emplace_back("/etc/nccl.conf");
  for (const std::string& conf : confs) {
    const std::string value = tunerPluginFromConf(readConfFile(conf));
    if (value.empty() || value == "none") continue;
    for (const std::string& name : pluginNames(value, "nccl-tuner")) {
      void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
      DisplacedTuner found = tableIn(handle, version, ourPath);
      if (found.table != nullptr) {
        found.source = "NCCL_TUNER_PLUGIN=" + value + " in " + conf;
        return found;  // the handle stays open while the table is in use: for the process
      }
      if (handle != nullptr) dlclose(handle);
    }
  }
  // (b) the net plugin NCCL loaded before its tuner.
  const char* net = getenv("NCCL_NET_PLUGIN");
  const std::string netValue = net != nullptr && net[0] != '\0' ? net : "";
  if (netValue == "none") return DisplacedTuner();
  const std::vector<std::string> names =
      netValue.empty() ? std::vector<std::string>{"libnccl-net.so"} : pluginNames(netValue, "nccl-net");
  for (const std::string& name : names) {
    void* handle = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
    DisplacedTuner found = tableIn(handle, version, ourPath);
    if (found.table != nullptr) {
      found.source = "the net plugin " + name;
      return found;
    }
    if (handle != nullptr) dlclose(handle);
  }
  return DisplacedTuner();
}

}  // namespace

std::string tunerPluginFromConf(const std::string& confText) {
  std::string value;
  std::istringstream lines(confText);
  std::string line;
  while (std::getline(lines, line)) {
    line = trim(line);
    if (line.empty() || line[0] == '#') continue;
    const size_t eq = line.find('=');
    if (eq == std::string::npos || trim(line.substr(0, eq)) != "NCCL_TUNER_PLUGIN") continue;
    value = trim(line.substr(eq + 1));
  }
  return value;
}

DisplacedTuner displacedTuner(int ncclAbiVersion, const std::string& ourPath) {
  static std::mutex mutex;
  static bool searched[8] = {};
  static DisplacedTuner found[8];
  if (ncclAbiVersion < 5 || ncclAbiVersion >= 8) return DisplacedTuner();
  std::lock_guard<std::mutex> lock(mutex);
  if (!searched[ncclAbiVersion]) {
    searched[ncclAbiVersion] = true;
    found[ncclAbiVersion] = search(ncclAbiVersion, ourPath);
  }
  return found[ncclAbiVersion];
}

}  // namespace nccl_lamport
