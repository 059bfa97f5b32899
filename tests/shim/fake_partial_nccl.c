/* A library in the global scope that defines one NCCL profiling alias and no pncclAllReduce (as
 * a profiler or a partial shim may): tests/shim/test_real_nccl.cc checks that the real NCCL's
 * functions all come from the one library that holds pncclAllReduce, never from this one. */
#include <nccl.h>

const char* pncclGetErrorString(ncclResult_t result) {
  (void)result;
  return "partial fake NCCL";
}
