// The scenarios every launch pattern runs (SPEC 7), on top of the helpers of gpu_test_support.
// Nothing here uses gtest assertions: scenarios run inside ranks and report through Failures.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {

// ---------------------------------------------------------------- scenarios

namespace {
const ncclDataType_t kDtypes[] = {ncclFloat32, ncclFloat16, ncclBfloat16};
const ncclRedOp_t kOps[] = {ncclSum, ncclAvg};

/** Largest count of dtype on the one-shot path (the crossover, c). */
size_t crossoverCount(const Harness& h, ncclDataType_t dtype) {
  const size_t bytes = h.slots[0].base.oneShotMaxBytes ? h.slots[0].base.oneShotMaxBytes : kTestOneShotMaxBytes;
  return bytes / elementSize(dtype);
}

using Row = std::vector<std::unique_ptr<CheckedCall>>;  // one call, one entry per slot

bool makeRow(Harness& h, const CallSpec& spec, uint64_t seed, Row* row) {
  for (RankSlot& s : h.slots) {
    row->emplace_back(new CheckedCall(spec, s));
    if (!row->back()->setupError().empty()) {
      h.fail(s, spec.label() + ": " + row->back()->setupError());
      return false;
    }
    row->back()->stage(seed);
  }
  return true;
}

bool issueRow(Harness& h, Row& row, bool reference, const char* what) {
  if (reference) {
    return h.referenceStep([&](RankSlot& s, ReferencePart part) { return row[s.index]->issueReference(part); }, what);
  }
  return h.step(false, [&](RankSlot& s) { return row[s.index]->issue(h, s); }, what);
}

void verifyRow(Harness& h, Row& row, bool withReference, const std::string& prefix) {
  for (RankSlot& s : h.slots) {
    const std::string problems = row[s.index]->verify(withReference);
    h.failures->addCheck();
    if (!problems.empty()) h.fail(s, prefix + row[s.index]->label() + ": " + problems);
    h.cross->submit(s, prefix + row[s.index]->label(), row[s.index]->result(), *h.failures);
  }
}
}  // namespace

std::string runCheckedStep(Harness& h, const CallSpec& spec, uint64_t seed, bool withReference) {
  Row row;
  const int before = h.failures->count();
  if (!makeRow(h, spec, seed, &row)) return "setup failed";
  const std::string label = row[0]->label();
  issueRow(h, row, false, label.c_str());
  if (withReference) issueRow(h, row, true, label.c_str());
  h.syncAll(label.c_str());
  verifyRow(h, row, withReference, "");
  return h.failures->count() == before ? "" : label + ": see the failures above";
}

void scenarioCommInfoAndRouting(Harness& h) {
  for (RankSlot& s : h.slots) {
    const ncclLamportCommInfo_t& b = s.base;
    if (b.nRanks != s.nRanks || b.rank != s.rank || b.oneShotMaxBytes != kTestOneShotMaxBytes || b.workspaceBytes == 0) {
      h.fail(s, format("comm info nRanks %d rank %d oneShotMaxBytes %zu workspaceBytes %zu; expected %d, %d, %zu "
                       "(NCCL_LAMPORT_ONESHOT_MAX_BYTES=256K) and > 0", b.nRanks, b.rank, b.oneShotMaxBytes,
                       b.workspaceBytes, s.nRanks, s.rank, kTestOneShotMaxBytes));
    }
    ncclLamportPath_t path = ncclLamportPathOneShot;
    ncclLamportCommInfo_t info{};
    info.known = 1;
    if (ncclLamportGetAllReducePath(s.comm, 1, ncclFloat32, ncclSum, nullptr) != ncclInvalidArgument ||
        ncclLamportGetCommInfo(s.comm, nullptr) != ncclInvalidArgument) {
      h.fail(s, "a NULL out-pointer must give ncclInvalidArgument");
    }
    if (ncclLamportGetAllReducePath(nullptr, 1, ncclFloat32, ncclSum, &path) != ncclSuccess || path != ncclLamportPathNccl ||
        ncclLamportGetCommInfo(nullptr, &info) != ncclSuccess || info.known != 0) {
      h.fail(s, "an unknown (NULL) comm must give ncclSuccess, the NCCL path and known == 0");
    }
    h.failures->addCheck();
  }
  struct Probe { ncclDataType_t dtype; ncclRedOp_t op; size_t count; };
  std::vector<Probe> probes = {{ncclFloat32, ncclProd, 16}, {ncclFloat32, ncclMax, 16}, {ncclFloat32, ncclMin, 16},
                               {ncclFloat16, ncclMax, 16},  {ncclFloat64, ncclSum, 16}, {ncclInt32, ncclSum, 16}};
  for (ncclDataType_t dtype : kDtypes) {
    const size_t c = crossoverCount(h, dtype);
    for (ncclRedOp_t op : kOps) {
      for (size_t count : {size_t{0}, size_t{1}, c, c + 1}) probes.push_back({dtype, op, count});
    }
  }
  for (RankSlot& s : h.slots) {
    for (const Probe& p : probes) {
      ncclLamportPath_t path = ncclLamportPathNccl;
      const ncclLamportPath_t expected = h.expectedPath(s, p.count, p.dtype, p.op);
      if (ncclLamportGetAllReducePath(s.comm, p.count, p.dtype, p.op, &path) != ncclSuccess || path != expected) {
        h.fail(s, format("path(n=%zu, datatype %d, op %d) is %d, expected %d", p.count, p.dtype, p.op, path, expected));
      }
    }
  }
  // Real calls at both sides of the crossover (they must flip from one-shot to NCCL there) ...
  uint64_t call = 0;
  for (ncclDataType_t dtype : kDtypes) {
    for (ncclRedOp_t op : kOps) {
      for (size_t count : {crossoverCount(h, dtype), crossoverCount(h, dtype) + 1}) {
        CallSpec spec;
        spec.dtype = dtype;
        spec.op = op;
        spec.count = count;
        runCheckedStep(h, spec, mixSeed(0xC405, call++), true);
      }
    }
  }
  // ... and calls the plugin must leave to NCCL (results not checked: NCCL's own business).
  std::vector<void*> buffers(h.slots.size(), nullptr);
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    if (cudaMalloc(&buffers[s.index], 16384) != cudaSuccess || cudaMemset(buffers[s.index], 0, 16384) != cudaSuccess) {
      h.fail(s, "cudaMalloc");
      return;
    }
  }
  for (const Probe& p : {Probe{ncclFloat32, ncclMax, 1024}, Probe{ncclInt32, ncclSum, 1024},
                         Probe{ncclFloat64, ncclSum, 1024}, Probe{ncclFloat32, ncclSum, 0}}) {
    h.step(false, [&](RankSlot& s) { return h.allReduce(s, buffers[s.index], buffers[s.index], p.count, p.dtype, p.op); },
           "unsupported call");
  }
  h.syncAll("unsupported calls");
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    cudaFree(buffers[s.index]);
  }
  h.checkCounters("routing");
}

void scenarioSweep(Harness& h, ncclDataType_t dtype) {
  const size_t c = crossoverCount(h, dtype);
  std::vector<size_t> counts = {1,    2,    3,    4,    5,    7,    8,     9,     15,    16,     17,   31,  33,
                                63,   65,   127,  255,  257,  1023, 1024,  1025,  4095,  4096,   4097, 65537,
                                c - 1, c,   c + 1, c + 17, 2 * c + 3};
  std::sort(counts.begin(), counts.end());
  counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
  struct Layout { bool inPlace; size_t send, recv; };
  const Layout layouts[] = {{false, 0, 0}, {false, 1, 3}, {false, 3, 0}, {true, 0, 0}, {true, 0, 1}};
  uint64_t call = 0;
  for (ncclRedOp_t op : kOps) {
    for (size_t count : counts) {
      for (const Layout& l : layouts) {
        CallSpec spec;
        spec.dtype = dtype;
        spec.op = op;
        spec.count = count;
        spec.inPlace = l.inPlace;
        spec.sendOffset = l.send;
        spec.recvOffset = l.recv;
        runCheckedStep(h, spec, mixSeed(0x5EED00 + dtype, call++), true);
      }
    }
  }
  h.checkCounters("sweep");
}

void scenarioLargeMessages(Harness& h) {
  // At 2 ranks the workspace must take the raised crossover, or every call below goes to NCCL and
  // the kernels this scenario is for never run.
  const RankSlot& first = h.slots[0];
  if (first.base.nRanks == 2 && first.base.oneShotMaxBytes < (size_t{6} << 20)) {
    h.fail(first, format("oneShotMaxBytes %zu at 2 ranks: the 1-6 MB calls would not take the one-shot",
                         first.base.oneShotMaxBytes));
    return;
  }
  struct Layout { bool inPlace; size_t send, recv; };
  const Layout layouts[] = {{false, 0, 0}, {false, 2, 6}, {true, 0, 0}};
  uint64_t call = 0;
  for (ncclDataType_t dtype : kDtypes) {
    for (size_t bytes : {(size_t{1} << 20) + 48, (size_t{2} << 20) + 2, size_t{3} << 20, size_t{6} << 20}) {
      for (ncclRedOp_t op : kOps) {
        for (const Layout& l : layouts) {
          CallSpec spec;
          spec.dtype = dtype;
          spec.op = op;
          spec.count = bytes / elementSize(dtype);
          spec.inPlace = l.inPlace;
          spec.sendOffset = l.send;
          spec.recvOffset = l.recv;
          runCheckedStep(h, spec, mixSeed(0x1A26E + dtype, call++), true);
        }
      }
    }
  }
  h.checkCounters("large messages");
}

void scenarioSpecialValues(Harness& h) {
  uint64_t call = 0;
  for (ncclDataType_t dtype : kDtypes) {
    const size_t c = crossoverCount(h, dtype);
    // (1, shift 1): a lone -0.0 (the fp32 sentinel word); (2, shift 0): +0 then -0 (the 16-bit one).
    const std::pair<size_t, unsigned> shapes[] = {{1, 1}, {2, 0}, {16, 0}, {33, 5}, {4099, 3}, {c, 7}};
    for (ncclRedOp_t op : kOps) {
      for (const auto& shape : shapes) {
        for (bool inPlace : {false, true}) {
          CallSpec spec;
          spec.dtype = dtype;
          spec.op = op;
          spec.count = shape.first;
          spec.specialShift = shape.second;
          spec.input = InputKind::kSpecial;
          spec.inPlace = inPlace;
          (inPlace ? spec.recvOffset : spec.sendOffset) = 1;
          runCheckedStep(h, spec, mixSeed(0x5BEC, call++), true);
        }
      }
    }
  }
  h.checkCounters("special values");
}

void scenarioBackToBack(Harness& h, int calls) {
  const size_t maxBytes = crossoverCount(h, ncclFloat32) * 4 * 5 / 4 + 64;
  std::vector<void*> scratchIn(h.slots.size(), nullptr), scratchOut(h.slots.size(), nullptr);
  CallSpec fill;
  fill.count = maxBytes / 4;
  std::vector<uint8_t> host;
  for (RankSlot& s : h.slots) {  // unchecked calls: constant random input, scratch output
    DeviceGuard guard(s.device);
    generateInput(fill, 77, s.rank, s.nRanks, &host);
    if (cudaMalloc(&scratchIn[s.index], maxBytes) != cudaSuccess || cudaMalloc(&scratchOut[s.index], maxBytes) != cudaSuccess ||
        cudaMemcpy(scratchIn[s.index], host.data(), host.size(), cudaMemcpyHostToDevice) != cudaSuccess) {
      h.fail(s, "back-to-back: scratch allocation failed");
      return;
    }
  }
  // The plan is identical on every rank: sizes log-uniform over 1 .. 1.25 c, dtype and op mixed.
  std::vector<CallSpec> plan(calls);
  std::vector<Row> sampled;
  Rng rng{0xB2B};
  for (int k = 0; k < calls; ++k) {
    CallSpec& spec = plan[k];
    spec.dtype = kDtypes[rng.next() % 3];
    spec.op = kOps[rng.next() % 2];
    const size_t c = crossoverCount(h, spec.dtype);
    spec.count = std::max<size_t>(1, static_cast<size_t>(std::exp(rng.uniform() * std::log(1.25 * c))));
    if (k % 97 == 0) spec.count = c + (k / 97) % 2;
    if (k % 10 != 0) continue;
    spec.inPlace = (k / 10) % 4 >= 2;
    spec.sendOffset = (k / 10) % 4 == 1 ? 1 : 0;
    spec.recvOffset = (k / 10) % 4 % 2 == 1 ? 3 : 0;
    sampled.emplace_back();
    if (!makeRow(h, spec, mixSeed(0xB2B, k), &sampled.back())) return;
  }
  if (!h.syncAll("back-to-back staging")) return;
  for (int k = 0; k < calls; ++k) {
    const CallSpec& spec = plan[k];
    const bool ok = k % 10 == 0 ? issueRow(h, sampled[k / 10], false, "back-to-back")
                                : h.step(false, [&](RankSlot& s) {
                                    return h.allReduce(s, scratchIn[s.index], scratchOut[s.index], spec.count, spec.dtype, spec.op);
                                  }, "back-to-back");
    if (!ok) break;
  }
  h.syncAll("back-to-back");
  h.checkNoAsyncError("back-to-back");
  for (Row& row : sampled) issueRow(h, row, true, "back-to-back reference");
  h.syncAll("back-to-back references");
  for (size_t i = 0; i < sampled.size(); ++i) verifyRow(h, sampled[i], true, format("b2b#%zu ", i * 10));
  h.checkCounters("back-to-back");
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    cudaFree(scratchIn[s.index]);
    cudaFree(scratchOut[s.index]);
  }
}

void scenarioCudaGraph(Harness& h, int replays) {
  const size_t small[] = {1, 7, 33, 1023, 4097, 16385};
  const int checked[] = {0, 4, 8, 9};
  std::vector<Row> rows(10);
  for (int i = 0; i < 10; ++i) {
    CallSpec spec;
    spec.dtype = kDtypes[i % 3];
    spec.op = kOps[i % 2];
    const size_t c = crossoverCount(h, spec.dtype);
    spec.count = i < 6 ? small[i] : i == 6 ? c / 2 + 1 : i == 7 ? c - 3 : i == 8 ? c : c + 5;  // 9: NCCL
    spec.inPlace = i == 2 || i == 6;
    spec.sendOffset = i % 3;
    spec.recvOffset = (i / 2) % 2;
    if (!makeRow(h, spec, mixSeed(0x6A, i), &rows[i])) return;
  }
  // Eager warm-up of the same calls: workspace and NCCL connections exist before the capture.
  for (Row& row : rows) issueRow(h, row, false, "graph warm-up");
  for (Row& row : rows) issueRow(h, row, true, "graph warm-up reference");
  h.syncAll("graph warm-up");
  for (Row& row : rows) verifyRow(h, row, true, "graph warm-up ");
  std::vector<cudaGraph_t> graphs(h.slots.size(), nullptr);
  std::vector<cudaGraphExec_t> execs(h.slots.size(), nullptr);
  bool ok = true;
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    const cudaError_t err = cudaStreamBeginCapture(s.stream, h.captureMode);
    if (err != cudaSuccess) h.fail(s, format("cudaStreamBeginCapture: %s", cudaGetErrorString(err)));
    ok = ok && err == cudaSuccess;
  }
  for (Row& row : rows) {
    ok = issueRow(h, row, false, "graph capture") && ok;
    // Name the first call that breaks the capture, instead of only seeing it at EndCapture.
    for (RankSlot& s : h.slots) {
      cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
      const cudaError_t err = cudaStreamIsCapturing(s.stream, &status);
      if (ok && (err != cudaSuccess || status != cudaStreamCaptureStatusActive)) {
        h.fail(s, format("capture broken after %s: %s (status %d)", row[s.index]->label().c_str(),
                         cudaGetErrorString(err), static_cast<int>(status)));
        ok = false;
      }
    }
  }
  // End every capture before instantiating any graph: with one thread capturing several streams
  // (thread-local mode), cudaGraphInstantiate is not allowed while another capture is open, and
  // trying it breaks that capture (seen on 2 x H200, CUDA 13.0).
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    const cudaError_t err = cudaStreamEndCapture(s.stream, &graphs[s.index]);
    if (err != cudaSuccess) h.fail(s, format("cudaStreamEndCapture: %s", cudaGetErrorString(err)));
    ok = ok && err == cudaSuccess;
  }
  for (RankSlot& s : h.slots) {
    if (!ok) break;
    DeviceGuard guard(s.device);
    const cudaError_t err = cudaGraphInstantiate(&execs[s.index], graphs[s.index], 0);
    if (err != cudaSuccess) h.fail(s, format("cudaGraphInstantiate: %s", cudaGetErrorString(err)));
    ok = ok && err == cudaSuccess;
  }
  h.checkCounters("graph capture");  // a captured call counts once, when captured
  for (int r = 0; ok && r < replays; ++r) {
    for (int i : checked) {
      for (RankSlot& s : h.slots) rows[i][s.index]->stage(mixSeed(0x6A00 + r, i));
    }
    for (RankSlot& s : h.slots) {
      DeviceGuard guard(s.device);
      const cudaError_t err = cudaGraphLaunch(execs[s.index], s.stream);
      if (err != cudaSuccess) h.fail(s, format("replay %d: cudaGraphLaunch: %s", r, cudaGetErrorString(err)));
      ok = ok && err == cudaSuccess;
    }
    const bool withReference = r % 100 == 0 || r == replays - 1;
    if (withReference) {
      for (int i : checked) issueRow(h, rows[i], true, "graph replay reference");
    }
    ok = h.syncAll("graph replay") && ok;
    for (int i : checked) verifyRow(h, rows[i], withReference, format("replay %d ", r));
  }
  for (RankSlot& s : h.slots) {
    DeviceGuard guard(s.device);
    if (execs[s.index]) cudaGraphExecDestroy(execs[s.index]);
    if (graphs[s.index]) cudaGraphDestroy(graphs[s.index]);
  }
  h.checkNoAsyncError("graph");
}

// ---------------------------------------------------------------- one process per GPU

}  // namespace gputest
}  // namespace nccl_lamport
