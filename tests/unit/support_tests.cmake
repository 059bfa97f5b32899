# Tests of plugin/transport/fd_exchange.cc and plugin/transport/topology.cc (linked through lamport_internal, the
# library the shared object links, plugin/CMakeLists.txt). include()d from tests/CMakeLists.txt.
#
# Two executables on purpose: test_fd_exchange forks child processes and must never have CUDA
# initialised; test_topology touches CUDA (its Gpu* tests) and never forks.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

add_executable(test_fd_exchange
  ${CMAKE_CURRENT_LIST_DIR}/test_fd_exchange.cc             # delivery, uid check
  ${CMAKE_CURRENT_LIST_DIR}/test_fd_exchange_robustness.cc  # timeouts, arguments, names, signals, leaks
)
target_link_libraries(test_fd_exchange PRIVATE lamport_internal GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_fd_exchange
  TEST_LIST test_fd_exchange_TESTS
  PROPERTIES LABELS cpu TIMEOUT 120)

add_executable(test_topology ${CMAKE_CURRENT_LIST_DIR}/test_topology.cc)
target_link_libraries(test_topology PRIVATE lamport_internal GTest::gtest_main)
# CPU part (bus-id parsing, argument checks) and GPU part (suites named Gpu*): same executable,
# two discoveries so each gets its label.
gtest_discover_tests(test_topology
  TEST_FILTER "-Gpu*"
  TEST_LIST test_topology_cpu_TESTS
  PROPERTIES LABELS cpu)
gtest_discover_tests(test_topology
  TEST_FILTER "Gpu*"
  TEST_LIST test_topology_gpu_TESTS
  PROPERTIES LABELS gpu SKIP_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
