# The entry hooks of tuner activation (plugin/hooks, SPEC 4a), label cpu: a stand-in library with
# NCCL-like prologue shapes (tests/shim/hooks), the engine linked into the test itself.
# x86-64 only (the engine reports "not capable" elsewhere).
if(NOT CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64" OR NOT TARGET lamport_hooks)
  return()
endif()
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)
enable_language(ASM)
set(_hooks ${CMAKE_CURRENT_LIST_DIR}/shim/hooks)

set_source_files_properties(${_hooks}/standin_cet.c PROPERTIES COMPILE_OPTIONS "-fcf-protection=full;-O2")
add_library(shim_hook_standin SHARED ${_hooks}/standin_entries.S ${_hooks}/standin_cet.c)
set_target_properties(shim_hook_standin PROPERTIES C_VISIBILITY_PRESET default)

add_executable(test_entry_hooks ${_hooks}/test_entry_hooks.cc)
target_link_libraries(test_entry_hooks PRIVATE lamport_hooks shim_hook_standin GTest::gtest_main
                                               Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(test_entry_hooks PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(test_entry_hooks PRIVATE STANDIN_LIBRARY="$<TARGET_FILE:shim_hook_standin>")
gtest_discover_tests(test_entry_hooks PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

add_executable(test_prologue_relocator ${_hooks}/test_prologue_relocator.cc)
target_link_libraries(test_prologue_relocator PRIVATE lamport_hooks GTest::gtest_main)
target_include_directories(test_prologue_relocator PRIVATE ${PROJECT_SOURCE_DIR})
gtest_discover_tests(test_prologue_relocator PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)
