# CPU test of nccl-lamport-bench's pure logic (options, size sweep, conversions, reference,
# tolerances, ulps, hash, aggregation across ranks, table/CSV/JSON). include()d by
# tests/CMakeLists.txt; needs the lamport_bench_logic target from bench/CMakeLists.txt.
if(NOT TARGET lamport_bench_logic)
  message(STATUS "test_bench_logic not built: no lamport_bench_logic "
                 "(NCCL_LAMPORT_BUILD_BENCH=OFF or nlohmann_json missing)")
  return()
endif()
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(test_bench_logic ${CMAKE_CURRENT_LIST_DIR}/test_bench_logic.cc)
target_link_libraries(test_bench_logic PRIVATE lamport_bench_logic GTest::gtest_main)
gtest_discover_tests(test_bench_logic PROPERTIES LABELS cpu)

# nccl-lamport-bench --loopback's report logic (bench/loopback_report.h).
add_executable(test_loopback_report ${CMAKE_CURRENT_LIST_DIR}/test_loopback_report.cc)
target_link_libraries(test_loopback_report PRIVATE lamport_bench_logic GTest::gtest_main)
target_compile_definitions(test_loopback_report PRIVATE NCCL_LAMPORT_SOURCE_DIR="${NCCL_LAMPORT_ROOT_DIR}")
gtest_discover_tests(test_loopback_report PROPERTIES LABELS cpu)

# nccl-lamport-bench's command line and --help (bench/bench_cli.h); needs CLI11.
if(TARGET lamport_bench_cli)
  add_executable(test_bench_cli ${CMAKE_CURRENT_LIST_DIR}/test_bench_cli.cc)
  target_link_libraries(test_bench_cli PRIVATE lamport_bench_cli GTest::gtest_main)
  gtest_discover_tests(test_bench_cli PROPERTIES LABELS cpu)
endif()

# nccl-lamport-bench --tune's decisions (bench/tune_logic.h) and JSON output of odd arguments.
add_executable(test_bench_tune ${CMAKE_CURRENT_LIST_DIR}/test_bench_tune.cc)
target_link_libraries(test_bench_tune PRIVATE lamport_bench_logic GTest::gtest_main)
gtest_discover_tests(test_bench_tune PROPERTIES LABELS cpu)

# bench/stats.h: the median of repetitions with a NaN among them.
add_executable(test_bench_stats ${CMAKE_CURRENT_LIST_DIR}/test_bench_stats.cc)
target_link_libraries(test_bench_stats PRIVATE lamport_bench_logic GTest::gtest_main)
gtest_discover_tests(test_bench_stats PROPERTIES LABELS cpu)
