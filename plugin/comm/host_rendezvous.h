// The host-local rendezvous of tuner activation (docs/tuner-activation.md): the local ranks of
// one communicator meet inside NCCL's init, where no NCCL collective can run, and leave with one verdict.
//
// Key: (uid, commId, nRanks). commId is NCCL's commHash (the same on every rank, new for each
// split); nRanks is part of the key, so ranks that disagree on it never meet and each side
// times out to "not accelerated". Transport: an abstract Unix socket named after the key; the
// first rank to bind it leads, the others connect (peers of another uid are refused, SO_PEERCRED).
// The leader closes the name as soon as all nRanks have joined, so a later communicator with the
// same commId (ranks that reuse one NCCL_COMM_ID) meets afresh.
//
// One verdict for every rank: the leader gathers nRanks joins (bounded by the timeout), decides,
// sends each rank the verdict with every rank's payload in a fixed order (sorted by host, pid and
// a random nonce, so the order - and with it the reduction order - is the same everywhere),
// collects an acknowledgement from each, then sends the commit: true only if every rank
// acknowledged a true verdict. A rank that loses its leader, or gets no commit in time, returns
// false. Residual risk: a leader that dies between two commits leaves ranks with
// different answers; the Lamport kernel's timeout bounds what follows.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace nccl_lamport {

/** What one rank brings to the rendezvous. */
struct RendezvousJoin {
  uint64_t commId = 0;
  uint32_t nRanks = 0;
  bool capable = true;           // this rank can take part (hooks in, devices fine, ...)
  std::vector<uint8_t> payload;  // gathered in rank order; at most kMaxRendezvousPayload bytes
};

/** Largest payload one rank may bring, bytes. */
constexpr uint32_t kMaxRendezvousPayload = 4096;

/** What every rank leaves with. */
struct RendezvousResult {
  bool ok = false;           // the committed verdict: accelerate this communicator
  std::string reason;        // why not (empty when ok)
  int index = -1;            // this rank's place in the agreed order (0..nRanks-1), when ok
  std::vector<std::vector<uint8_t>> payloads;  // every rank's payload in that order, when ok
};

/**
 * The abstract Unix socket name the ranks of `join` meet on, without its leading NUL:
 * "nccl-lamport-rdv-<uid>-<commId, 16 hex digits>-<nRanks>" (`ss -xl` lists it while a leader
 * waits). Exposed for diagnostics and tests.
 */
std::string hostRendezvousName(const RendezvousJoin& join);

/**
 * Runs the rendezvous for `join` with a total bound of timeoutMs (join phase plus commit; a
 * rank may wait up to about twice that when its leader waits the full time). Never throws.
 * `testHooks` are for tests only: "die-after-join" makes this process exit right after it sent
 * its join (a rank that dies in the middle).
 */
RendezvousResult hostRendezvous(const RendezvousJoin& join, uint64_t timeoutMs, const char* testHooks = nullptr);

}  // namespace nccl_lamport
