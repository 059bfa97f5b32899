// nccl-lamport-bench: the small statistics the bench needs (median of repetitions, bandwidths).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>
#include <vector>

namespace nccl_lamport::bench {

/** Median of the values (mean of the middle two for an even count); NaN when empty or when any
 *  value is NaN (std::sort has no order with a NaN among the values). */
[[nodiscard]] inline double median(std::vector<double> values) {
  const bool anyNan = std::any_of(values.begin(), values.end(), [](double v) { return std::isnan(v); });
  if (values.empty() || anyNan) return std::numeric_limits<double>::quiet_NaN();
  std::sort(values.begin(), values.end());
  const size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : 0.5 * (values[mid - 1] + values[mid]);
}

/** Algorithm bandwidth in GB/s (1e9 bytes/s): bytes / time. NaN when us is not positive. */
[[nodiscard]] inline double algBandwidthGBs(size_t bytes, double us) {
  if (!(us > 0)) return std::numeric_limits<double>::quiet_NaN();
  return static_cast<double>(bytes) / (us * 1e3);
}

/**
 * Bus bandwidth of an allreduce in GB/s: algbw * 2(n-1)/n (the nccl-tests convention: what each
 * rank's links carry in a bandwidth-optimal allreduce). 0 for one rank.
 */
[[nodiscard]] inline double busBandwidthGBs(size_t bytes, double us, int nRanks) {
  if (nRanks < 1) return std::numeric_limits<double>::quiet_NaN();
  return algBandwidthGBs(bytes, us) * 2.0 * (nRanks - 1) / nRanks;
}

}  // namespace nccl_lamport::bench
