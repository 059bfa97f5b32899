// GPU tests of allreduce inside NCCL groups, next to other NCCL work in the same group (issue 3,
// point 1), one process per GPU (2 forked ranks; this gtest process never touches CUDA).
//
// The rule under test (README, "Groups"): a call the plugin takes launches at call time, i.e.
// before the NCCL work of its group on that stream, and that rule is the same on every rank, so
// every stream sees the same order of work on every rank. NCCL's allgather and send/recv in the
// same group must still complete, on the same communicator and on another one.
//
// Every test checks each allreduce against the fp64 reference and against NCCL's own result
// (ncclOwnAllReduce, eager rounds and the first/last replay), bit-identical across ranks; every
// allgather and send/recv byte for byte (allgather results also across ranks); outputs poisoned
// and inputs fresh for every round. It also shows acceleration, not just correctness:
// ncclLamportGetAllReducePath is checked before every call (Harness::allReduce), and each
// communicator's lamportCalls counter must grow by exactly the number of Lamport-sized calls
// (<= NCCL_LAMPORT_ONESHOT_MAX_BYTES=256K, set by the suite) the test issued.
//
// Waits are bounded: streams are polled for 60 s and NCCL_LAMPORT_TIMEOUT_MS=20000 turns a lost
// Lamport round into an error; a stream still busy is a failure, after which the communicators
// are aborted (releasing any waiting kernel) and the test stops.
//  - SameCommAllGatherSendRecv: allreduce + allgather + send/recv on one comm in one group, the
//    allreduce first, in the middle and last.
//  - OtherCommAllGatherSendRecv: allreduce on A, allgather + send/recv on B (a split of A) in the
//    same group, and the reverse; B's calls on its own stream or on A's.
//  - TwoCommsAndAcrossTheCrossover: Lamport-sized allreduces on two comms in one group; a group
//    mixing Lamport-sized and above-crossover allreduces on both comms.
//  - NestedGroups: ncclGroupStart inside ncclGroupStart (two and three deep) around mixed work.
//  - SixteenAllReducesInOneGroup: 16 allreduces of 1 element to past the crossover in one group.
//  - CapturedGroupsReplayed50: all of the above captured into one CUDA graph (B's stream forked
//    into the capture and joined back) and replayed 50 times with new inputs.
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tests/gpu/gpu_test_support.h"

namespace nccl_lamport {
namespace gputest {
namespace {

constexpr double kWaitSeconds = 60;  // per stream; the Lamport timeout below is 20 s

ForkOptions twoRanks(double timeoutSeconds) { return forkRanks(2, timeoutSeconds, {}, 20000); }

CallSpec spec(ncclDataType_t dtype, size_t count, ncclRedOp_t op = ncclSum, bool inPlace = false,
              size_t offset = 0) {
  CallSpec s;
  s.dtype = dtype;
  s.count = count;
  s.op = op;
  s.inPlace = inPlace;
  (inPlace ? s.recvOffset : s.sendOffset) = offset;
  return s;
}

/** What the suite's crossover makes a Lamport call, decided from the spec alone (not from the
 *  plugin's answer), so the counter check below is independent of the plugin's routing. */
bool lamportSized(const CallSpec& s) {
  return s.count > 0 && elementSize(s.dtype) * s.count <= kTestOneShotMaxBytes && (s.op == ncclSum || s.op == ncclAvg);
}

// ---------------------------------------------------------------- NCCL data movement

/** One allgather, or one ring send/recv (to rank+1, from rank-1), of int32 words on one rank,
 *  with its own device buffers. Every rank's input is a pure function of (seed, rank), so the
 *  expected output is known exactly; the output is poisoned (0xFF) before every call. */
class DataMove {
 public:
  enum Kind { kAllGather, kSendRecv };

  DataMove(Kind kind, size_t count, const RankSlot& slot)
      : kind_(kind), count_(count), rank_(slot.rank), nRanks_(slot.nRanks), device_(slot.device), comm_(slot.comm) {
    outWords_ = kind == kAllGather ? count * nRanks_ : count;
    DeviceGuard guard(device_);
    if (cudaMalloc(&in_, count * 4) != cudaSuccess || cudaMalloc(&out_, outWords_ * 4) != cudaSuccess) {
      setupError_ = "cudaMalloc failed";
    }
  }
  ~DataMove() {
    DeviceGuard guard(device_);
    if (in_ != nullptr) cudaFree(in_);
    if (out_ != nullptr) cudaFree(out_);
  }
  DataMove(const DataMove&) = delete;
  DataMove& operator=(const DataMove&) = delete;

  const std::string& setupError() const { return setupError_; }
  const std::vector<uint8_t>& result() const { return result_; }
  bool isAllGather() const { return kind_ == kAllGather; }
  std::string label() const {
    return format("%s n=%zu seed=%llx", kind_ == kAllGather ? "allgather" : "sendrecv", count_,
                  static_cast<unsigned long long>(seed_));
  }

  void stage(uint64_t seed, cudaStream_t stream) {
    seed_ = seed;
    fill(seed, rank_, &input_);
    if (!setupError_.empty()) return;
    DeviceGuard guard(device_);
    cudaMemcpyAsync(in_, input_.data(), count_ * 4, cudaMemcpyHostToDevice, stream);
    cudaMemsetAsync(out_, 0xFF, outWords_ * 4, stream);
  }

  ncclResult_t issue(cudaStream_t stream) {
    if (kind_ == kAllGather) return ncclAllGather(in_, out_, count_, ncclInt32, comm_, stream);
    // A group of its own (nested in the caller's): an ungrouped send before a recv deadlocks.
    ncclResult_t rc = ncclGroupStart();
    if (rc != ncclSuccess) return rc;
    rc = ncclSend(in_, count_, ncclInt32, (rank_ + 1) % nRanks_, comm_, stream);
    const ncclResult_t recv = ncclRecv(out_, count_, ncclInt32, (rank_ + nRanks_ - 1) % nRanks_, comm_, stream);
    const ncclResult_t end = ncclGroupEnd();
    return rc != ncclSuccess ? rc : recv != ncclSuccess ? recv : end;
  }

  /** After the stream is idle: "" or the first wrong word. */
  std::string verify() {
    result_.clear();
    if (!setupError_.empty()) return setupError_;
    std::vector<uint32_t> got(outWords_), expected, part;
    DeviceGuard guard(device_);
    if (cudaMemcpy(got.data(), out_, outWords_ * 4, cudaMemcpyDeviceToHost) != cudaSuccess) return "download failed";
    if (kind_ == kAllGather) {
      for (int r = 0; r < nRanks_; ++r) {
        fill(seed_, r, &part);
        expected.insert(expected.end(), part.begin(), part.end());
      }
    } else {
      fill(seed_, (rank_ + nRanks_ - 1) % nRanks_, &expected);
    }
    const auto* bytes = reinterpret_cast<const uint8_t*>(got.data());
    result_.assign(bytes, bytes + outWords_ * 4);
    size_t wrong = 0, first = 0;
    for (size_t i = 0; i < outWords_; ++i) {
      if (got[i] != expected[i] && wrong++ == 0) first = i;
    }
    if (wrong == 0) return "";
    return format("%zu of %zu words wrong, first [%zu]: 0x%08x expected 0x%08x%s", wrong, outWords_, first, got[first],
                  expected[first], got[first] == 0xFFFFFFFFu ? " (the poison: never written)" : "");
  }

 private:
  void fill(uint64_t seed, int rank, std::vector<uint32_t>* out) const {
    Rng rng{mixSeed(seed ^ 0xDA7A, static_cast<uint64_t>(rank) + 1)};
    out->resize(count_);
    for (uint32_t& w : *out) {
      w = static_cast<uint32_t>(rng.next());
      if (w == 0xFFFFFFFFu) w = 0;  // never the poison, so "not written" is always seen
    }
  }

  Kind kind_;
  size_t count_, outWords_ = 0;
  int rank_, nRanks_, device_;
  ncclComm_t comm_;
  uint64_t seed_ = 0;
  void *in_ = nullptr, *out_ = nullptr;
  std::vector<uint32_t> input_;
  std::vector<uint8_t> result_;
  std::string setupError_;
};

// ---------------------------------------------------------------- rounds: scripts of group calls

/** The communicators a test drives: 0 = A (the forked harness's), 1 = B (a split of A) or none.
 *  Each harness's slot stream is where its calls go; inputs are staged on A's stream. */
struct Comms {
  explicit Comms(Harness& a, Harness* b = nullptr) : h{&a, b} {}
  Harness* h[2];
  cudaStream_t staging() const { return h[0]->slots[0].stream; }
  std::vector<cudaStream_t> streams() const {
    std::vector<cudaStream_t> all = {staging()};
    if (h[1] != nullptr && h[1]->slots[0].stream != staging()) all.push_back(h[1]->slots[0].stream);
    return all;
  }
};

/** A script of group calls, allreduces and data moves that can be run again and again (eagerly
 *  or into a graph capture) with new inputs each time. */
class Round {
 public:
  Round(Comms& c, std::string name) : c_(c), name_(std::move(name)) {}

  Round& start() { return add(Step::kStart, 0, 0); }
  Round& end() { return add(Step::kEnd, 0, 0); }
  Round& allReduce(int comm, const CallSpec& s) {
    RankSlot staged = c_.h[comm]->slots[0];
    staged.stream = c_.staging();  // staging and NCCL's reference on A's stream
    calls_.emplace_back(new CheckedCall(s, staged));
    callComm_.push_back(comm);
    callLamport_.push_back(lamportSized(s));
    if (!calls_.back()->setupError().empty()) setupFailed(calls_.back()->setupError());
    return add(Step::kAllReduce, comm, calls_.size() - 1);
  }
  Round& allGather(int comm, size_t count) { return move(DataMove::kAllGather, comm, count); }
  Round& sendRecv(int comm, size_t count) { return move(DataMove::kSendRecv, comm, count); }

  /** Lamport-sized allreduces of this round on comm (0 or 1). */
  uint64_t lamportCount(int comm) const {
    uint64_t n = 0;
    for (size_t i = 0; i < calls_.size(); ++i) n += callComm_[i] == comm && callLamport_[i] ? 1 : 0;
    return n;
  }

  void stage(uint64_t seed) {
    for (size_t i = 0; i < calls_.size(); ++i) calls_[i]->stage(mixSeed(seed, i));
    for (size_t i = 0; i < moves_.size(); ++i) moves_[i]->stage(mixSeed(seed, 1000 + i), c_.staging());
  }

  /** Every step in order, all of them even after an error (so every group is closed). */
  bool issue() {
    bool ok = true;
    for (size_t k = 0; k < steps_.size(); ++k) {
      const Step& st = steps_[k];
      Harness& hx = *c_.h[st.comm];
      ncclResult_t rc = ncclSuccess;
      const char* what = "ncclGroupStart";
      if (st.op == Step::kStart) {
        rc = ncclGroupStart();
      } else if (st.op == Step::kEnd) {
        rc = ncclGroupEnd();
        what = "ncclGroupEnd";
      } else if (st.op == Step::kAllReduce) {
        CheckedCall& call = *calls_[st.index];
        rc = call.issue(hx, hx.slots[0]);  // checks ncclLamportGetAllReducePath first
        what = "ncclAllReduce";
        if (callLamport_[st.index] && !call.expectLamport) {
          failf(hx, "%s: %s is Lamport-sized but the communicator would send it to NCCL (not accelerated)",
                name_.c_str(), call.label().c_str());
        }
      } else {
        rc = moves_[st.index]->issue(hx.slots[0].stream);
        what = moves_[st.index]->isAllGather() ? "ncclAllGather" : "ncclSend/ncclRecv";
      }
      if (rc != ncclSuccess) {
        failf(hx, "%s: step %zu (%s on comm %c) returned %d (%s)", name_.c_str(), k, what, "AB"[st.comm], rc,
              ncclGetErrorString(rc));
        ok = false;
      }
    }
    return ok;
  }

  /** NCCL's own allreduce of every call's private input copy (outside any group). */
  void issueReferences() {
    for (size_t i = 0; i < calls_.size(); ++i) {
      const ncclResult_t rc = calls_[i]->issueReference();
      if (rc != ncclSuccess) failf(*c_.h[0], "%s: NCCL's own allreduce (reference) returned %d", name_.c_str(), rc);
    }
  }

  void verify(bool withReference, const std::string& prefix) {
    for (size_t i = 0; i < calls_.size(); ++i) {
      Harness& hx = *c_.h[callComm_[i]];
      const std::string label = prefix + name_ + format(" ar%zu%c ", i, "AB"[callComm_[i]]) + calls_[i]->label();
      const std::string problems = calls_[i]->verify(withReference);
      hx.failures->addCheck();
      if (!problems.empty()) hx.fail(hx.slots[0], label + ": " + problems);
      hx.cross->submit(hx.slots[0], label, calls_[i]->result(), *hx.failures);  // bit-identical across ranks
    }
    for (size_t i = 0; i < moves_.size(); ++i) {
      Harness& hx = *c_.h[moveComm_[i]];
      const std::string label = prefix + name_ + format(" mv%zu%c ", i, "AB"[moveComm_[i]]) + moves_[i]->label();
      const std::string problems = moves_[i]->verify();
      hx.failures->addCheck();
      if (!problems.empty()) hx.fail(hx.slots[0], label + ": " + problems);
      if (moves_[i]->isAllGather()) hx.cross->submit(hx.slots[0], label, moves_[i]->result(), *hx.failures);
    }
  }

  bool ok() const { return ok_; }

 private:
  struct Step {
    enum Op { kStart, kEnd, kAllReduce, kMove } op;
    int comm;
    size_t index;
  };
  Round& add(Step::Op op, int comm, size_t index) {
    steps_.push_back(Step{op, comm, index});
    return *this;
  }
  Round& move(DataMove::Kind kind, int comm, size_t count) {
    moves_.emplace_back(new DataMove(kind, count, c_.h[comm]->slots[0]));
    moveComm_.push_back(comm);
    if (!moves_.back()->setupError().empty()) setupFailed(moves_.back()->setupError());
    return add(Step::kMove, comm, moves_.size() - 1);
  }
  void setupFailed(const std::string& why) {
    failf(*c_.h[0], "%s: set-up: %s", name_.c_str(), why.c_str());
    ok_ = false;
  }

  Comms& c_;
  std::string name_;
  std::vector<Step> steps_;
  std::vector<std::unique_ptr<CheckedCall>> calls_;
  std::vector<int> callComm_;
  std::vector<bool> callLamport_;
  std::vector<std::unique_ptr<DataMove>> moves_;
  std::vector<int> moveComm_;
  bool ok_ = true;
};

/** Fresh inputs for every round, all rounds issued back to back, a bounded wait, NCCL's reference
 *  of every allreduce, verification. False when a stream stays busy (or set-up failed): the caller
 *  then aborts its communicators and stops. */
bool runEager(Comms& c, const std::vector<Round*>& rounds, uint64_t seed, const std::string& prefix) {
  Harness& h = *c.h[0];
  for (size_t i = 0; i < rounds.size(); ++i) {
    if (!rounds[i]->ok()) return false;
    rounds[i]->stage(mixSeed(seed, i));
  }
  if (!waitStreams(h, {c.staging()}, kWaitSeconds, "staging")) return false;
  for (Round* r : rounds) r->issue();
  if (!waitStreams(h, c.streams(), kWaitSeconds, (prefix + "the rounds").c_str())) return false;
  for (Round* r : rounds) r->issueReferences();
  if (!waitStreams(h, {c.staging()}, kWaitSeconds, (prefix + "NCCL's reference calls").c_str())) return false;
  for (Round* r : rounds) r->verify(true, prefix);
  return true;
}

/** The suite's crossover is what the comms agreed (else the "above crossover" calls are not). */
void checkCrossover(Comms& c) {
  for (Harness* hx : c.h) {
    if (hx != nullptr && hx->slots[0].base.oneShotMaxBytes != kTestOneShotMaxBytes) {
      failf(*hx, "oneShotMaxBytes is %zu, the suite sets NCCL_LAMPORT_ONESHOT_MAX_BYTES=256K",
            hx->slots[0].base.oneShotMaxBytes);
    }
  }
}

/** Acceleration: each comm's lamportCalls grew by exactly the number of Lamport-sized
 *  allreduces issued or captured on it. */
void checkAcceleration(Comms& c, uint64_t expectedA, uint64_t expectedB, const char* what) {
  const uint64_t expected[2] = {expectedA, expectedB};
  for (int k = 0; k < 2; ++k) {
    if (c.h[k] == nullptr || c.h[k]->slots[0].comm == nullptr) continue;
    checkLamportGrowth(*c.h[k], expected[k], (std::string(what) + (k ? ", comm B" : ", comm A")).c_str());
  }
}

/** B: an accelerated split of A with its own stream, destroyed at scope exit (before A). */
struct SecondComm {
  OwnedStream stream;
  Harness h;
  explicit SecondComm(Harness& a) {
    ncclComm_t comm = stream.stream ? splitAccelerated(a) : nullptr;
    if (stream.stream == nullptr) failf(a, "cudaStreamCreateWithFlags failed");
    h = harnessFor(a, comm, stream.stream);
  }
  ~SecondComm() {
    if (h.slots[0].comm != nullptr && ncclCommDestroy(h.slots[0].comm) != ncclSuccess) {
      failf(h, "ncclCommDestroy(B) failed");
    }
  }
  bool ok() const { return h.slots[0].comm != nullptr; }
  SecondComm(const SecondComm&) = delete;
  SecondComm& operator=(const SecondComm&) = delete;
};

/** The way out after a stuck stream: abort both comms (releases waiting kernels), nothing left to destroy. */
void abortAll(Comms& c) {
  for (Harness* hx : c.h) {
    if (hx != nullptr) abortQuietly(&hx->slots[0].comm);
  }
}

// ---------------------------------------------------------------- tests

TEST(Groups, SameCommAllGatherSendRecv) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    Comms c(h);
    Round first(c, "ar-first"), middle(c, "ar-mid"), last(c, "ar-last");
    first.start().allReduce(0, spec(ncclBfloat16, 4096)).allGather(0, 1024).sendRecv(0, 1024).end();
    middle.start().allGather(0, 777).allReduce(0, spec(ncclFloat32, 2048, ncclAvg)).sendRecv(0, 4096).end();
    last.start().sendRecv(0, 1).allGather(0, 65536).allReduce(0, spec(ncclFloat16, 4097, ncclSum, true, 1)).end();
    constexpr int kIterations = 10;
    for (int it = 0; it < kIterations; ++it) {
      if (!runEager(c, {&first, &middle, &last}, mixSeed(0x5A3E, it), format("it%d ", it))) return abortAll(c);
    }
    checkAcceleration(c, kIterations * 3, 0, "same comm");
  });
}

TEST(Groups, OtherCommAllGatherSendRecv) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    SecondComm b(h);
    if (!b.ok()) return;
    Comms c(h, &b.h);
    Round arOnA(c, "arA-movesB"), arOnB(c, "arB-movesA");
    arOnA.start().allGather(1, 1024).allReduce(0, spec(ncclBfloat16, 4096)).sendRecv(1, 1024).end();
    arOnB.start().sendRecv(0, 2048).allReduce(1, spec(ncclBfloat16, 4096, ncclAvg)).allGather(0, 512).end();
    constexpr int kIterations = 12;
    for (int it = 0; it < kIterations; ++it) {
      // B's calls alternate between its own stream and A's (the plugin orders B's calls across
      // its streams; NCCL's group spans both).
      b.h.slots[0].stream = it % 2 ? h.slots[0].stream : b.stream.stream;
      if (!runEager(c, {&arOnA, &arOnB}, mixSeed(0x07E2, it), format("it%d ", it))) return abortAll(c);
    }
    b.h.slots[0].stream = b.stream.stream;
    checkAcceleration(c, kIterations, kIterations, "other comm");
  });
}

TEST(Groups, TwoCommsAndAcrossTheCrossover) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    SecondComm b(h);
    if (!b.ok()) return;
    Comms c(h, &b.h);
    checkCrossover(c);
    const size_t past = kTestOneShotMaxBytes / 2 + 64;  // bf16 elements just past the crossover
    Round two(c, "two-comms"), mixed(c, "across");
    two.start().allReduce(0, spec(ncclBfloat16, 4096)).allReduce(1, spec(ncclFloat32, 2048)).end();
    mixed.start()
        .allReduce(0, spec(ncclBfloat16, 4096))                             // Lamport
        .allReduce(0, spec(ncclBfloat16, past))                             // NCCL
        .allReduce(1, spec(ncclFloat32, kTestOneShotMaxBytes / 2, ncclAvg))  // NCCL (512 KB)
        .allReduce(1, spec(ncclFloat16, 33))                                // Lamport
        .allReduce(0, spec(ncclFloat32, kTestOneShotMaxBytes / 4))          // Lamport, at the crossover
        .end();
    constexpr int kIterations = 8;
    for (int it = 0; it < kIterations; ++it) {
      if (!runEager(c, {&two, &mixed}, mixSeed(0x7C0, it), format("it%d ", it))) return abortAll(c);
    }
    checkAcceleration(c, kIterations * (two.lamportCount(0) + mixed.lamportCount(0)),
                      kIterations * (two.lamportCount(1) + mixed.lamportCount(1)), "two comms, crossover");
  });
}

/** The nested-group rounds (also captured by the graph test). */
void nestedRounds(Round* nest, Round* deep) {
  nest->start()
      .allReduce(0, spec(ncclBfloat16, 4096))
      .start()
      .allGather(0, 256)
      .allReduce(1, spec(ncclFloat32, 1000, ncclAvg))
      .sendRecv(1, 300)
      .end()
      .allReduce(0, spec(ncclBfloat16, 200000))  // NCCL (400 KB)
      .start()
      .allReduce(0, spec(ncclFloat32, 3))
      .end()
      .end();
  deep->start().start().start().allReduce(1, spec(ncclFloat16, 8192)).end().sendRecv(0, 64).end()
      .allReduce(0, spec(ncclBfloat16, 1)).end();
}

TEST(Groups, NestedGroups) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    SecondComm b(h);
    if (!b.ok()) return;
    Comms c(h, &b.h);
    Round nest(c, "nested"), deep(c, "deep");
    nestedRounds(&nest, &deep);
    constexpr int kIterations = 8;
    for (int it = 0; it < kIterations; ++it) {
      if (!runEager(c, {&nest, &deep}, mixSeed(0x9E57, it), format("it%d ", it))) return abortAll(c);
    }
    checkAcceleration(c, kIterations * (nest.lamportCount(0) + deep.lamportCount(0)),
                      kIterations * (nest.lamportCount(1) + deep.lamportCount(1)), "nested groups");
  });
}

/** 16 allreduces of one comm in one group: 1 element to past the crossover, every dtype, sum and
 *  avg, in-place and unaligned (also captured by the graph test). */
void sixteenRound(Round* r, int comm) {
  const size_t cross = kTestOneShotMaxBytes;
  r->start()
      .allReduce(comm, spec(ncclBfloat16, 1))
      .allReduce(comm, spec(ncclFloat32, 2, ncclAvg))
      .allReduce(comm, spec(ncclFloat16, 7))
      .allReduce(comm, spec(ncclBfloat16, 33, ncclSum, true))
      .allReduce(comm, spec(ncclFloat32, 255, ncclAvg, false, 1))
      .allReduce(comm, spec(ncclFloat16, 1024))
      .allReduce(comm, spec(ncclBfloat16, 4096))
      .allReduce(comm, spec(ncclFloat32, 4097, ncclAvg, true, 3))
      .allReduce(comm, spec(ncclBfloat16, 16385, ncclSum, false, 3))
      .allReduce(comm, spec(ncclFloat32, cross / 4))            // at the crossover: Lamport
      .allReduce(comm, spec(ncclBfloat16, cross / 2, ncclAvg))  // at the crossover: Lamport
      .allReduce(comm, spec(ncclBfloat16, cross / 2 + 1))       // NCCL
      .allReduce(comm, spec(ncclFloat32, 300000, ncclAvg))      // NCCL
      .allReduce(comm, spec(ncclFloat16, 8))
      .allReduce(comm, spec(ncclFloat16, 100000, ncclAvg))
      .allReduce(comm, spec(ncclBfloat16, 3, ncclSum, true, 1))
      .end();
}

TEST(Groups, SixteenAllReducesInOneGroup) {
  LAMPORT_RUN_FORKED(twoRanks(300), [](Harness& h, RankContext&) {
    Comms c(h);
    checkCrossover(c);
    Round sixteen(c, "x16");
    sixteenRound(&sixteen, 0);
    constexpr int kIterations = 10;
    for (int it = 0; it < kIterations; ++it) {
      if (!runEager(c, {&sixteen}, mixSeed(0x16, it), format("it%d ", it))) return abortAll(c);
    }
    if (sixteen.lamportCount(0) != 14) failf(h, "the 16-call round should hold 14 Lamport-sized calls");
    checkAcceleration(c, kIterations * sixteen.lamportCount(0), 0, "16 in one group");
  });
}

/** Captures every round on A's stream, with B's stream forked into the capture and joined back
 *  (as frameworks do with a side stream), and instantiates it. nullptr (and a failure) on error. */
cudaGraphExec_t captureRounds(Comms& c, const std::vector<Round*>& rounds) {
  Harness& h = *c.h[0];
  const cudaStream_t mainStream = c.staging(), side = c.h[1]->slots[0].stream;
  cudaEvent_t fork = nullptr, join = nullptr;
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaEventCreateWithFlags(&fork, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaEventCreateWithFlags(&join, cudaEventDisableTiming);
  if (err == cudaSuccess) err = cudaStreamBeginCapture(mainStream, cudaStreamCaptureModeGlobal);
  if (err != cudaSuccess) {
    failf(h, "before the capture: %s", cudaGetErrorString(err));
  } else {
    err = cudaEventRecord(fork, mainStream);
    if (err == cudaSuccess) err = cudaStreamWaitEvent(side, fork, 0);
    bool ok = err == cudaSuccess;
    for (Round* r : rounds) ok = r->issue() && ok;
    const cudaError_t joined = cudaEventRecord(join, side);
    if (joined != cudaSuccess || cudaStreamWaitEvent(mainStream, join, 0) != cudaSuccess) ok = false;
    const cudaError_t ended = cudaStreamEndCapture(mainStream, &graph);
    if (ended != cudaSuccess || !ok) {
      failf(h, "capture: fork %s, calls %s, cudaStreamEndCapture %s", cudaGetErrorString(err), ok ? "ok" : "failed",
            cudaGetErrorString(ended));
    } else if ((err = cudaGraphInstantiate(&exec, graph, 0)) != cudaSuccess) {
      failf(h, "cudaGraphInstantiate: %s", cudaGetErrorString(err));
      exec = nullptr;
    }
  }
  if (graph != nullptr) cudaGraphDestroy(graph);  // the instantiated graph is a copy
  if (fork != nullptr) cudaEventDestroy(fork);
  if (join != nullptr) cudaEventDestroy(join);
  return exec;
}

TEST(Groups, CapturedGroupsReplayed50) {
  LAMPORT_RUN_FORKED(twoRanks(400), [](Harness& h, RankContext&) {
    SecondComm b(h);
    if (!b.ok()) return;
    Comms c(h, &b.h);
    checkCrossover(c);
    const size_t past = kTestOneShotMaxBytes / 2 + 64;
    Round same(c, "g-same"), other(c, "g-other"), two(c, "g-two"), nest(c, "g-nest"), deep(c, "g-deep"),
        sixteen(c, "g-x16");
    same.start().allReduce(0, spec(ncclBfloat16, 4096)).allGather(0, 1024).sendRecv(0, 512).end();
    other.start().allGather(1, 2048).allReduce(0, spec(ncclFloat32, 2048, ncclAvg)).sendRecv(1, 100).end();
    two.start()
        .allReduce(0, spec(ncclBfloat16, 4096))
        .allReduce(1, spec(ncclBfloat16, 4096))
        .allReduce(1, spec(ncclBfloat16, past))  // NCCL
        .end();
    nestedRounds(&nest, &deep);
    sixteenRound(&sixteen, 1);  // on B, whose calls run on the side stream of the capture
    const std::vector<Round*> rounds = {&same, &other, &two, &nest, &deep, &sixteen};
    uint64_t perRun[2] = {0, 0};
    for (Round* r : rounds) {
      perRun[0] += r->lamportCount(0);
      perRun[1] += r->lamportCount(1);
    }
    // Eager warm-up of the same calls: workspaces used and NCCL's connections made before capture.
    if (!runEager(c, rounds, 0x6AF0, "warm-up ")) return abortAll(c);
    const cudaGraphExec_t exec = captureRounds(c, rounds);
    if (exec == nullptr) return;
    // A captured call counts once, when captured; replays do not move the counters.
    checkAcceleration(c, 2 * perRun[0], 2 * perRun[1], "after capture");
    constexpr int kReplays = 50;
    bool ok = true;
    for (int r = 0; ok && r < kReplays; ++r) {
      for (size_t i = 0; i < rounds.size(); ++i) rounds[i]->stage(mixSeed(0x6A00 + r, i));  // on A's stream
      const cudaError_t err = cudaGraphLaunch(exec, c.staging());
      if (err != cudaSuccess) {
        failf(h, "replay %d: cudaGraphLaunch: %s", r, cudaGetErrorString(err));
        break;
      }
      ok = waitStreams(h, c.streams(), kWaitSeconds, format("replay %d", r).c_str());
      const bool withReference = r == 0 || r == kReplays - 1;
      if (ok && withReference) {
        for (Round* round : rounds) round->issueReferences();
        ok = waitStreams(h, {c.staging()}, kWaitSeconds, "references after a replay");
      }
      for (Round* round : rounds) {
        if (ok) round->verify(withReference, format("replay %d ", r));
      }
    }
    cudaGraphExecDestroy(exec);
    if (!ok) return abortAll(c);
    checkAcceleration(c, 2 * perRun[0], 2 * perRun[1], "after 50 replays");
  });
}

}  // namespace
}  // namespace gputest
}  // namespace nccl_lamport
