// Shared-GPU mode of the forked GPU tests: several ranks, each its own process, on one GPU, so the
// multi-rank tests (workspace exchange, fd passing, Lamport kernels, lifecycle, non-blocking
// communicators, groups) can run on a machine with a single GPU.
//
// Turned on by NCCL_LAMPORT_TEST_SHARED_GPU=1 in the test process (a test-harness variable, not
// a plugin knob). How it gets past the two checks that refuse such a job:
//  - NCCL refuses two ranks of one communicator on the same GPU of the same host (its
//    duplicate-GPU check compares host hash and PCI bus id). Each rank gets its own NCCL_HOSTID,
//    so NCCL takes the ranks for separate hosts and connects them through its socket transport
//    on the loopback interface (NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1).
//  - nccl-lamport's own host check (hostname + boot id, never NCCL_HOSTID) still sees one host;
//    NCCL_LAMPORT_REQUIRE_NVLINK=0 accepts a pair of ranks on one GPU ("same GPU" is not NVLink).
// The ranks' kernels are time-sliced by the GPU (one process's context at a time), so every call
// costs about one time slice: results are real, timings are not, and the in-process patterns
// (one process driving several GPUs) still need several GPUs. Every communicator must then be
// eligible: an ineligible one is a failure, never a skip.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace nccl_lamport {
namespace gputest {

/** True when NCCL_LAMPORT_TEST_SHARED_GPU is 1 (read each time: tests may set it). */
bool sharedGpuMode();

/** Ranks a forked test runs with: `requested` if > 0, else one per GPU; in shared-GPU mode on a
 *  single GPU, NCCL_LAMPORT_TEST_SHARED_GPU_RANKS (2 to 8, default 2) ranks. */
int forkedRankCount(int requested, int gpus, bool shared);

/** "" when `nRanks` forked ranks can run on `gpus` GPUs, else the skip reason. Normal mode needs
 *  nRanks distinct GPUs (and at least 2); shared-GPU mode needs one GPU. */
std::string forkedRankSkipReason(int nRanks, int gpus, bool shared);

/** The CUDA device of forked rank `rank`: the rank itself, or rank % gpus in shared-GPU mode. */
int forkedRankDevice(int rank, int gpus, bool shared);

/** The variables a forked rank sets before its first NCCL call in shared-GPU mode (empty
 *  otherwise): a per-rank NCCL_HOSTID, and NCCL_SOCKET_IFNAME=lo, NCCL_IB_DISABLE=1,
 *  NCCL_LAMPORT_REQUIRE_NVLINK=0 unless the environment already sets them. */
std::vector<std::pair<std::string, std::string>> sharedGpuEnvironment(int rank, bool shared);

}  // namespace gputest
}  // namespace nccl_lamport
