// nccl-lamport-bench: error checks that throw, and RAII owners of the CUDA objects a rank uses.
//
// Caveat: a rank that fails leaks its RankResources on purpose (see rank_body.cc): cudaFree
// synchronises the device, and with a peer gone a collective may never finish. The owners below
// that can be destroyed during unwinding (events, graphs, streams) do not block.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace nccl_lamport::bench {

/** Any failure of a rank; what() is the line the report prints. */
class BenchError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** This rank stops because another rank failed or died (not this rank's own fault). */
class PeerFailure : public BenchError {
 public:
  using BenchError::BenchError;
};

inline void checkCuda(cudaError_t err, const char* what) {
  if (err != cudaSuccess) {
    throw BenchError(std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                     cudaGetErrorString(err) + ")");
  }
}

inline void checkNccl(ncclResult_t res, const char* what) {
  if (res != ncclSuccess) {
    throw BenchError(std::string(what) + ": " + ncclGetErrorString(res));
  }
}

#define BENCH_CUDA(call) ::nccl_lamport::bench::checkCuda((call), #call)
#define BENCH_NCCL(call) ::nccl_lamport::bench::checkNccl((call), #call)

/** cudaMalloc'ed memory. */
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    BENCH_CUDA(cudaMalloc(&ptr_, bytes == 0 ? 1 : bytes));
  }
  ~DeviceBuffer() {
    if (ptr_ != nullptr) (void)cudaFree(ptr_);
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  [[nodiscard]] void* get() const { return ptr_; }
  [[nodiscard]] size_t bytes() const { return bytes_; }

 private:
  void* ptr_ = nullptr;
  size_t bytes_ = 0;
};

/** A non-blocking stream (never synchronises with the legacy default stream). */
class Stream {
 public:
  Stream() { BENCH_CUDA(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~Stream() {
    if (stream_ != nullptr) (void)cudaStreamDestroy(stream_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

/** A timing event. */
class Event {
 public:
  Event() { BENCH_CUDA(cudaEventCreate(&event_)); }
  ~Event() {
    if (event_ != nullptr) (void)cudaEventDestroy(event_);
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  [[nodiscard]] cudaEvent_t get() const { return event_; }

 private:
  cudaEvent_t event_ = nullptr;
};

/** An instantiated graph. */
class GraphExec {
 public:
  GraphExec() = default;
  ~GraphExec() { reset(); }
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  /** Instantiates graph (which stays owned by the caller). */
  void instantiate(cudaGraph_t graph) {
    reset();
    BENCH_CUDA(cudaGraphInstantiate(&exec_, graph, 0));
  }
  void reset() {
    if (exec_ != nullptr) (void)cudaGraphExecDestroy(exec_);
    exec_ = nullptr;
  }
  [[nodiscard]] cudaGraphExec_t get() const { return exec_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace nccl_lamport::bench
