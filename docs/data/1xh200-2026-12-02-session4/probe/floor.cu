// Floor probe (not part of the project): how fast can a minimal Lamport one-shot of one 16-byte
// vector be, 2 ranks as 2 streams on one GPU, graph chains, PDL. Variants remove pieces.
#include <cuda_runtime.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstring>
#include <cstdlib>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("CUDA %s at %d: %s\n", #x, __LINE__, cudaGetErrorString(e)); std::exit(1);} } while (0)

struct alignas(16) V { uint32_t w[4]; };
struct Ws { V state; V buf[3]; V pad[4]; };

__device__ __forceinline__ V ldv(const void* p) { V v; asm volatile("ld.volatile.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ V ldrg(const void* p) { V v; asm volatile("ld.relaxed.gpu.global.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.w[0]), "=r"(v.w[1]), "=r"(v.w[2]), "=r"(v.w[3]) : "l"(p) : "memory"); return v; }
__device__ __forceinline__ void stv(void* p, V v) { asm volatile("st.volatile.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]) : "memory"); }
__device__ __forceinline__ void stw(void* p, V v) { asm volatile("st.global.v4.u32 [%0], {%1,%2,%3,%4};" :: "l"(p), "r"(v.w[0]), "r"(v.w[1]), "r"(v.w[2]), "r"(v.w[3]) : "memory"); }
__device__ __forceinline__ void pdlWait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
__device__ __forceinline__ void pdlTrigger() { asm volatile("griddepcontrol.launch_dependents;" ::: "memory"); }
__device__ __forceinline__ bool empty(const V& v) { return (v.w[0] == 0x80000000u) | (v.w[1] == 0x80000000u) | (v.w[2] == 0x80000000u) | (v.w[3] == 0x80000000u); }

enum Mode { kEmpty = 0, kCopy, kLamport, kLamportRelaxedPoll, kLamportNoTrigger, kLamportTriggerFirst,
            kLamportNoInput, kLamportNoOutput, kLamportSmemState, kLamport4Pollers, kLamportNanosleep, kModes };
const char* kNames[] = {"empty", "copy", "lamport", "lamport-relaxed.gpu-poll", "lamport-no-trigger", "lamport-trigger-before-wait",
                        "lamport-no-input(cheat)", "lamport-no-output(cheat)", "lamport-smem-state(+syncthreads)", "lamport-4-pollers", "lamport-nanosleep-poll"};

template <int MODE>
__global__ void __launch_bounds__(128) k(Ws* own, Ws* peer, const V* in, V* out) {
  if (MODE == kLamportTriggerFirst) pdlTrigger();
  pdlWait();
  if (MODE != kLamportNoTrigger && MODE != kLamportTriggerFirst) pdlTrigger();
  if (MODE == kEmpty) return;
  if (MODE == kCopy) { if (threadIdx.x == 0) stw(out, ldv(in)); return; }
  __shared__ V sState;
  __shared__ int sDone;
  V st;
  if (MODE == kLamportSmemState || MODE == kLamport4Pollers) {
    if (threadIdx.x == 0) { sState = ldv(&own->state); sDone = 0; }
    __syncthreads();
    st = sState;
  } else {
    if (threadIdx.x != 0) return;
    st = ldv(&own->state);
  }
  const uint32_t idx = st.w[0];
  V x;
  if (MODE == kLamportNoInput) { x = V{{1u, 2u, 3u, 4u}}; } else { x = ldv(in); }
  if (MODE == kLamport4Pollers) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 0 && lane == 0) {
      stv(&peer->buf[idx], x);
      stw(&own->buf[(idx + 2) % 3], V{{0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u}});
      stv(&own->state, V{{(idx + 1) % 3, 0, 0, st.w[3] + 1}});
    }
    if (lane != 0) return;
    // staggered pollers: warp w starts w*~40 ns later
    if (warp > 0) __nanosleep(warp * 40);
    V y;
    for (;;) {
      y = ldv(&own->buf[idx]);
      if (!empty(y)) break;
      if (*(volatile int*)&sDone) return;
    }
    if (atomicExch(&sDone, 1) == 0) {
      V r; for (int i = 0; i < 4; ++i) r.w[i] = __float_as_uint(__uint_as_float(x.w[i]) + __uint_as_float(y.w[i]));
      stw(out, r);
    }
    return;
  }
  if (MODE == kLamportSmemState && threadIdx.x != 0) return;
  stv(&peer->buf[idx], x);
  stw(&own->buf[(idx + 2) % 3], V{{0x80000000u, 0x80000000u, 0x80000000u, 0x80000000u}});
  stv(&own->state, V{{(idx + 1) % 3, 0, 0, st.w[3] + 1}});
  V y;
  for (;;) {
    y = MODE == kLamportRelaxedPoll ? ldrg(&own->buf[idx]) : ldv(&own->buf[idx]);
    if (!empty(y)) break;
    if (MODE == kLamportNanosleep) __nanosleep(20);
  }
  V r; for (int i = 0; i < 4; ++i) r.w[i] = __float_as_uint(__uint_as_float(x.w[i]) + __uint_as_float(y.w[i]));
  if (MODE != kLamportNoOutput) stw(out, r);
}

typedef void (*KFn)(Ws*, Ws*, const V*, V*);
KFn kernels[] = {k<0>, k<1>, k<2>, k<3>, k<4>, k<5>, k<6>, k<7>, k<8>, k<9>, k<10>};

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  int threads = 32;
  const int only = argc > 1 ? std::atoi(argv[1]) : -1;
  const int onlyG = argc > 2 ? std::atoi(argv[2]) : 0;
  Ws* ws[2]; V* in[2]; V* out[2]; cudaStream_t s[2];
  for (int r = 0; r < 2; ++r) {
    CK(cudaMalloc(&ws[r], sizeof(Ws))); CK(cudaMalloc(&in[r], 16)); CK(cudaMalloc(&out[r], 16));
    CK(cudaStreamCreateWithFlags(&s[r], cudaStreamNonBlocking));
  }
  auto reset = [&]() {
    for (int r = 0; r < 2; ++r) {
      Ws h; std::memset(&h, 0, sizeof h);
      for (int b = 0; b < 3; ++b) for (int i = 0; i < 4; ++i) h.buf[b].w[i] = 0x80000000u;
      CK(cudaMemcpy(ws[r], &h, sizeof h, cudaMemcpyHostToDevice));
      float f[4] = {1.0f + r, 2.0f, 3.0f, 4.5f};
      CK(cudaMemcpy(in[r], f, 16, cudaMemcpyHostToDevice));
      CK(cudaMemset(out[r], 0xff, 16));
    }
    CK(cudaDeviceSynchronize());
  };
  for (int G : {50, 500}) {
    if (onlyG != 0 && G != onlyG) continue;
    for (int m = 0; m < kModes; ++m) {
      if (only >= 0 && m != only) continue;
      reset();
      int nthreads = (m == kLamport4Pollers || m == kLamportSmemState) ? 128 : threads;
      cudaGraphExec_t ex[2];
      for (int r = 0; r < 2; ++r) {
        CK(cudaStreamBeginCapture(s[r], cudaStreamCaptureModeThreadLocal));
        for (int i = 0; i < G; ++i) {
          cudaLaunchConfig_t c = {}; cudaLaunchAttribute a[1];
          a[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; a[0].val.programmaticStreamSerializationAllowed = 1;
          c.gridDim = dim3(1); c.blockDim = dim3(nthreads); c.stream = s[r]; c.attrs = a; c.numAttrs = 1;
          CK(cudaLaunchKernelEx(&c, kernels[m], ws[r], ws[1 - r], (const V*)in[r], out[r]));
        }
        cudaGraph_t g; CK(cudaStreamEndCapture(s[r], &g)); CK(cudaGraphInstantiate(&ex[r], g, 0)); CK(cudaGraphDestroy(g));
      }
      cudaEvent_t e0[2], e1[2];
      for (int r = 0; r < 2; ++r) { CK(cudaEventCreate(&e0[r])); CK(cudaEventCreate(&e1[r])); }
      for (int w = 0; w < 4; ++w) for (int r = 0; r < 2; ++r) CK(cudaGraphLaunch(ex[r], s[r]));
      CK(cudaDeviceSynchronize());
      const int replays = G == 50 ? 5 : 1;
      std::vector<double> reps;
      for (int rep = 0; rep < 7; ++rep) {
        for (int r = 0; r < 2; ++r) CK(cudaEventRecord(e0[r], s[r]));
        for (int i = 0; i < replays; ++i) for (int r = 0; r < 2; ++r) CK(cudaGraphLaunch(ex[r], s[r]));
        for (int r = 0; r < 2; ++r) CK(cudaEventRecord(e1[r], s[r]));
        double worst = 0;
        for (int r = 0; r < 2; ++r) { CK(cudaEventSynchronize(e1[r])); float ms; CK(cudaEventElapsedTime(&ms, e0[r], e1[r])); worst = std::max(worst, ms * 1000.0); }
        reps.push_back(worst / (G * replays));
      }
      std::sort(reps.begin(), reps.end());
      float o[4]; CK(cudaMemcpy(o, out[0], 16, cudaMemcpyDeviceToHost));
      const bool ok = m < kLamport || m == kLamportNoOutput || m == kLamportNoInput || (o[0] == 3.0f && o[1] == 4.0f && o[2] == 6.0f && o[3] == 9.0f);
      std::printf("G=%3d %-34s %.3f us/call (min %.3f max %.3f) %s\n", G, kNames[m], reps[3], reps[0], reps[6], ok ? "" : "WRONG");
      for (int r = 0; r < 2; ++r) { CK(cudaGraphExecDestroy(ex[r])); CK(cudaEventDestroy(e0[r])); CK(cudaEventDestroy(e1[r])); }
    }
  }
  return 0;
}
