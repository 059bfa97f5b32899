// Small RAII guards for CUDA state we must leave as we found it.
#pragma once

#include <cuda_runtime_api.h>

namespace nccl_lamport {

/** Makes `device` current for the guard's lifetime, then restores the caller's device. Does
 *  nothing when it is current already (the common case on the hot path). */
class ScopedDevice {
 public:
  explicit ScopedDevice(int device) {
    if (cudaGetDevice(&previous_) != cudaSuccess) previous_ = -1;
    switched_ = previous_ != device && cudaSetDevice(device) == cudaSuccess;
  }
  ~ScopedDevice() {
    if (switched_ && previous_ >= 0) cudaSetDevice(previous_);
  }
  ScopedDevice(const ScopedDevice&) = delete;
  ScopedDevice& operator=(const ScopedDevice&) = delete;

 private:
  int previous_ = -1;
  bool switched_ = false;
};

/** Restores the caller's current device when the scope ends, however the code inside moved it
 *  (several communicators' devices in turn) and wherever it returns. */
class RestoreCurrentDevice {
 public:
  RestoreCurrentDevice() {
    if (cudaGetDevice(&device_) != cudaSuccess) device_ = -1;
  }
  ~RestoreCurrentDevice() {
    int now = -1;
    if (device_ >= 0 && (cudaGetDevice(&now) != cudaSuccess || now != device_)) cudaSetDevice(device_);
  }
  RestoreCurrentDevice(const RestoreCurrentDevice&) = delete;
  RestoreCurrentDevice& operator=(const RestoreCurrentDevice&) = delete;

 private:
  int device_ = -1;
};

/** Relaxed stream-capture mode for this thread (as NCCL does around its own set-up), so our
 *  allocations and synchronisations neither fail nor break another thread's global-mode capture. */
class ScopedRelaxedCapture {
 public:
  ScopedRelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ~ScopedRelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode_); }
  ScopedRelaxedCapture(const ScopedRelaxedCapture&) = delete;
  ScopedRelaxedCapture& operator=(const ScopedRelaxedCapture&) = delete;

 private:
  cudaStreamCaptureMode mode_ = cudaStreamCaptureModeRelaxed;
};

}  // namespace nccl_lamport
