// CPU tests of bench/stats.h beyond tests/unit/test_bench_logic.cc: the median of repetitions
// when one of them is NaN.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/stats.h"

namespace nccl_lamport::bench {
namespace {

// std::sort with a NaN among the values has no defined order (NaN compares false both ways), so
// the answer depended on where the NaN stood: {NaN, 3, 1} gave 1, {1, NaN, 3} NaN, {3, 1, NaN} 3.
// A repetition that measured nothing makes the median unknown, whatever its position.
TEST(Stats, MedianWithANanIsNanWhereverItStands) {
  const double nan = std::nan("");
  for (size_t at = 0; at < 5; ++at) {
    std::vector<double> values = {1, 2, 3, 4};
    values.insert(values.begin() + static_cast<long>(at), nan);
    EXPECT_TRUE(std::isnan(median(values))) << "NaN at " << at;
  }
  for (std::vector<double> v : {std::vector<double>{nan, 3, 1}, {1, nan, 3}, {3, 1, nan}, {nan}, {2, nan}}) {
    EXPECT_TRUE(std::isnan(median(v))) << v.size();
  }
  EXPECT_EQ(median({5, 1, 4, 2}), 3.0);
  EXPECT_EQ(median({7}), 7.0);
}

}  // namespace
}  // namespace nccl_lamport::bench
