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

# The lazily loaded NVML table against the loader's lock: a first use while a library
# constructor (another thread's dlopen) uses them too (tests/unit/test_loader_lock_order.cc).
add_library(shim_ctor_runs_callback SHARED ${PROJECT_SOURCE_DIR}/tests/shim/ctor_runs_callback.c)
set_target_properties(shim_ctor_runs_callback PROPERTIES C_VISIBILITY_PRESET default)
add_executable(test_loader_lock_order ${CMAKE_CURRENT_LIST_DIR}/test_loader_lock_order.cc)
target_link_libraries(test_loader_lock_order PRIVATE lamport_internal GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(test_loader_lock_order PRIVATE
  CTOR_RUNS_CALLBACK_PATH="$<TARGET_FILE:shim_ctor_runs_callback>")
add_dependencies(test_loader_lock_order shim_ctor_runs_callback)
gtest_discover_tests(test_loader_lock_order PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
