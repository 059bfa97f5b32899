#include "tests/gpu/shared_gpu.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

namespace nccl_lamport {
namespace gputest {

bool sharedGpuMode() {
  const char* v = std::getenv("NCCL_LAMPORT_TEST_SHARED_GPU");
  return v != nullptr && std::strcmp(v, "1") == 0;
}

int forkedRankCount(int requested, int gpus, bool shared) {
  if (requested > 0) return requested;
  if (!shared || gpus != 1) return gpus;
  const char* v = std::getenv("NCCL_LAMPORT_TEST_SHARED_GPU_RANKS");
  const int ranks = v != nullptr ? std::atoi(v) : 2;
  return ranks >= 2 && ranks <= 8 ? ranks : 2;
}

std::string forkedRankSkipReason(int nRanks, int gpus, bool shared) {
  if (shared) {
    if (gpus >= 1) return "";
    return "needs a GPU (shared-GPU mode), this machine has none";
  }
  if (gpus >= 2 && gpus >= nRanks) return "";
  return "needs " + std::to_string(std::max(2, nRanks)) + " GPUs, this machine has " + std::to_string(gpus) +
         " (NCCL_LAMPORT_TEST_SHARED_GPU=1 runs the ranks on one GPU)";
}

int forkedRankDevice(int rank, int gpus, bool shared) { return shared && gpus > 0 ? rank % gpus : rank; }

std::vector<std::pair<std::string, std::string>> sharedGpuEnvironment(int rank, bool shared) {
  std::vector<std::pair<std::string, std::string>> env;
  if (!shared) return env;
  env.push_back({"NCCL_HOSTID", "nccl-lamport-shared-gpu-rank" + std::to_string(rank)});
  const std::pair<const char*, const char*> defaults[] = {
      {"NCCL_SOCKET_IFNAME", "lo"}, {"NCCL_IB_DISABLE", "1"}, {"NCCL_LAMPORT_REQUIRE_NVLINK", "0"}};
  for (const auto& kv : defaults) {
    if (std::getenv(kv.first) == nullptr) env.push_back({kv.first, kv.second});
  }
  return env;
}

}  // namespace gputest
}  // namespace nccl_lamport
