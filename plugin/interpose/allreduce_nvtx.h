// The NVTX range of an allreduce we take. NCCL opens a range named after the API function in its
// NVTX domain "NCCL" for every ncclAllReduce (src/collectives.cc, NVTX3_FUNC_WITH_PARAMS); a call
// we take never reaches that code, so without this range it would vanish from Nsight Systems
// timelines and from tools that count NCCL's ranges. Ours has the same domain and name, without
// NCCL's payload (communicator hash, bytes, op). NVTX is header-only: no DT_NEEDED (it loads a
// tool only where one is attached, through NVTX_INJECTION64_PATH).
#pragma once

namespace nccl_lamport {

/** Whether NCCL_NVTX_DISABLE turns NVTX ranges off, as NCCL reads it (an integer in base 0,
 *  non-zero: off). value: the variable's text, nullptr when unset. */
bool nvtxDisabledBy(const char* value);

/** RAII: an "ncclAllReduce" range in NVTX domain "NCCL" for its lifetime, unless NCCL_NVTX_DISABLE
 *  (read once) says off. Without a tool attached, opening and closing cost a few nanoseconds. */
class AllReduceNvtxRange {
 public:
  AllReduceNvtxRange();
  ~AllReduceNvtxRange();
  AllReduceNvtxRange(const AllReduceNvtxRange&) = delete;
  AllReduceNvtxRange& operator=(const AllReduceNvtxRange&) = delete;

 private:
  bool open_ = false;
};

}  // namespace nccl_lamport
