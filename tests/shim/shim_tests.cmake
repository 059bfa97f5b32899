# libnccl-lamport.so as "the NCCL library" of programs that dlopen NCCL themselves (label cpu, no
# GPU): by path (VLLM_NCCL_SO_PATH, ctypes), by name under the LD_AUDIT module, and which real
# NCCL plugin/loader/real_nccl.cc picks. Included from tests/CMakeLists.txt.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)

set(_shim ${CMAKE_CURRENT_LIST_DIR})
set(_lamport_so ${PROJECT_BINARY_DIR}/lib/libnccl-lamport.so)
set(_audit_so ${PROJECT_BINARY_DIR}/lib/libnccl-lamport-audit.so)

# Which real NCCL is picked, and realNcclHasProfilingApi(): real_nccl.cc compiled into a test
# that does not link NCCL; one process per scenario (the choice is once per process).
add_library(shim_fake_old_nccl SHARED ${_shim}/fake_old_nccl.c)
target_link_libraries(shim_fake_old_nccl PRIVATE nccl_headers)
set_target_properties(shim_fake_old_nccl PROPERTIES C_VISIBILITY_PRESET default)
add_executable(test_real_nccl ${_shim}/test_real_nccl.cc ${PROJECT_SOURCE_DIR}/plugin/loader/real_nccl.cc)
target_link_libraries(test_real_nccl PRIVATE lamport_common GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(test_real_nccl PRIVATE FAKE_OLD_NCCL_PATH="$<TARGET_FILE:shim_fake_old_nccl>")
add_dependencies(test_real_nccl shim_fake_old_nccl)
# A second copy of libnccl-lamport.so (a file of its own, so a link map of its own) behind the
# name libnccl.so.2, and a library that defines one profiling alias but no pncclAllReduce.
add_library(shim_fake_partial_nccl SHARED ${_shim}/fake_partial_nccl.c)
target_link_libraries(shim_fake_partial_nccl PRIVATE nccl_headers)
set_target_properties(shim_fake_partial_nccl PROPERTIES C_VISIBILITY_PRESET default)
set(_copy_dir ${CMAKE_CURRENT_BINARY_DIR}/shim_copy)
add_custom_target(shim_lamport_copy ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_copy_dir}
  COMMAND ${CMAKE_COMMAND} -E copy_if_different ${_lamport_so} ${_copy_dir}/libnccl.so.2
  DEPENDS nccl-lamport VERBATIM)
target_compile_definitions(test_real_nccl PRIVATE LAMPORT_COPY_PATH="${_copy_dir}/libnccl.so.2"
                           FAKE_PARTIAL_NCCL_PATH="$<TARGET_FILE:shim_fake_partial_nccl>")
add_dependencies(test_real_nccl shim_fake_partial_nccl shim_lamport_copy)
add_test(NAME shim_real_nccl.RejectsAnotherCopyByConfiguredPath
         COMMAND test_real_nccl --gtest_filter=RealNccl.RejectsAnotherCopyByConfiguredPath)
add_test(NAME shim_real_nccl.RejectsAnotherCopyByName COMMAND test_real_nccl --gtest_filter=RealNccl.RejectsAnotherCopyByName)
add_test(NAME shim_real_nccl.RejectsALibraryThatIsNoNccl COMMAND test_real_nccl --gtest_filter=RealNccl.RejectsALibraryThatIsNoNccl)
set_tests_properties(shim_real_nccl.RejectsALibraryThatIsNoNccl PROPERTIES LABELS cpu
                     ENVIRONMENT "NCCL_DEBUG=WARN" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
set_tests_properties(shim_real_nccl.RejectsAnotherCopyByConfiguredPath PROPERTIES LABELS cpu
                     ENVIRONMENT "NCCL_DEBUG=WARN" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
set_tests_properties(shim_real_nccl.RejectsAnotherCopyByName PROPERTIES LABELS cpu
                     ENVIRONMENT "NCCL_DEBUG=WARN;LD_LIBRARY_PATH=${_copy_dir}" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")

# The signature-agnostic forwarders (plugin/abi/opaque_forward.S) with no NCCL (each returns its
# fallback) and with a stand-in NCCL whose functions check every argument register
# (tests/shim/fake_opaque_nccl.c); with the real NCCL below.
add_library(shim_fake_opaque_nccl SHARED ${_shim}/fake_opaque_nccl.c)
set_target_properties(shim_fake_opaque_nccl PROPERTIES C_VISIBILITY_PRESET default)
add_executable(shim_opaque_calls ${_shim}/opaque_calls.c)
target_link_libraries(shim_opaque_calls PRIVATE nccl_headers ${CMAKE_DL_LIBS})
add_dependencies(shim_opaque_calls nccl-lamport shim_fake_opaque_nccl)
add_test(NAME shim_opaque.no_nccl COMMAND shim_opaque_calls none ${_lamport_so})
add_test(NAME shim_opaque.abi COMMAND shim_opaque_calls abi ${_lamport_so})
set_tests_properties(shim_opaque.no_nccl PROPERTIES LABELS cpu
  ENVIRONMENT "NCCL_DEBUG=WARN;NCCL_LAMPORT_NCCL_PATH=/nonexistent/libnccl.so.2")
set_tests_properties(shim_opaque.abi PROPERTIES LABELS cpu
  ENVIRONMENT "NCCL_DEBUG=WARN;NCCL_LAMPORT_NCCL_PATH=$<TARGET_FILE:shim_fake_opaque_nccl>")

# The lazy resolution against the loader's lock: a first call of a forwarder (C++ and trampoline)
# while another thread's dlopen runs a constructor that calls it (tests/shim/test_resolve_lock_order.cc).
add_library(shim_ctor_calls_nccl SHARED ${_shim}/ctor_calls_nccl.c)
set_target_properties(shim_ctor_calls_nccl PROPERTIES C_VISIBILITY_PRESET default)
target_link_libraries(shim_ctor_calls_nccl PRIVATE ${CMAKE_DL_LIBS})
add_executable(test_resolve_lock_order ${_shim}/test_resolve_lock_order.cc)
target_link_libraries(test_resolve_lock_order PRIVATE GTest::gtest_main ${CMAKE_DL_LIBS})
target_include_directories(test_resolve_lock_order PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(test_resolve_lock_order PRIVATE LAMPORT_SO_PATH="${_lamport_so}"
                           CTOR_CALLS_NCCL_PATH="$<TARGET_FILE:shim_ctor_calls_nccl>"
                           FAKE_NCCL_PATH="$<TARGET_FILE:shim_fake_opaque_nccl>")
add_dependencies(test_resolve_lock_order nccl-lamport shim_ctor_calls_nccl shim_fake_opaque_nccl)
gtest_discover_tests(test_resolve_lock_order PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# NCCL_LAMPORT_AUDIT_DEBUG prints decisions about NCCL libraries only: a program that loads none
# (here `env` running `true`, two execs under the audit module) prints nothing of ours.
find_program(NCCL_LAMPORT_ENV_PROGRAM env REQUIRED)
add_test(NAME shim_audit.debug_silent_without_nccl COMMAND ${NCCL_LAMPORT_ENV_PROGRAM} true)
set_tests_properties(shim_audit.debug_silent_without_nccl PROPERTIES LABELS cpu
  ENVIRONMENT "LD_AUDIT=${_audit_so};NCCL_LAMPORT_AUDIT_DEBUG=1" FAIL_REGULAR_EXPRESSION "nccl-lamport-audit")

# The tests that need the real libnccl.so.2 find it through the loader's search path, as the
# programs they imitate do: the directory of the NCCL library the root CMakeLists found.
if(NOT NCCL_LIBRARY)
  message(WARNING "NCCL library not found: the shim tests (tests/shim/shim_tests.cmake) are not registered")
  return()
endif()
get_filename_component(_nccl_dir ${NCCL_LIBRARY} DIRECTORY)
set(_nccl_env "LD_LIBRARY_PATH=${_nccl_dir}" "NCCL_DEBUG=WARN")

foreach(_case LoadsLibncclByNameWhenNoneIsLoaded UsesAnNcclInTheGlobalScope FindsAnNcclLoadedLocally
              OldNcclWithoutProfilingApi ConfiguredPathIsTheOnlyCandidate GlobalScopeResolvesFromOneLibrary
              AConfiguredPathThatIsNoRegularFileIsNotOpened)
  add_test(NAME shim_real_nccl.${_case} COMMAND test_real_nccl --gtest_filter=RealNccl.${_case})
  set_tests_properties(shim_real_nccl.${_case} PROPERTIES LABELS cpu ENVIRONMENT "${_nccl_env}" TIMEOUT 60
                       FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()

# A C program that dlopens NCCL and calls it by handle (tests/shim/dlopen_nccl.c).
add_executable(shim_dlopen_nccl ${_shim}/dlopen_nccl.c)
target_link_libraries(shim_dlopen_nccl PRIVATE nccl_headers ${CMAKE_DL_LIBS})
target_include_directories(shim_dlopen_nccl PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(shim_dlopen_nccl nccl-lamport nccl-lamport-audit)
# libnccl.so.2 -> libnccl-lamport.so, for the "we found only ourselves" guard; and
# libnccl.so.2 -> the real NCCL in a directory of its own, a path no search would give.
set(_self_link ${CMAKE_CURRENT_BINARY_DIR}/shim_self/libnccl.so.2)
set(_real_link ${CMAKE_CURRENT_BINARY_DIR}/shim_real/libnccl.so.2)
# The same, in a directory whose name has a '$' that is no dynamic string token ($ORIGIN, $LIB,
# $PLATFORM): the loader opens such a path as written.
set(_odd_dir "${CMAKE_CURRENT_BINARY_DIR}/shim_odd$dir")
set(_odd_link "${_odd_dir}/libnccl.so.2")
get_filename_component(_nccl_real_file ${NCCL_LIBRARY} REALPATH)
add_custom_command(TARGET shim_dlopen_nccl POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E make_directory ${CMAKE_CURRENT_BINARY_DIR}/shim_self ${CMAKE_CURRENT_BINARY_DIR}/shim_real
  COMMAND ${CMAKE_COMMAND} -E create_symlink ${_lamport_so} ${_self_link}
  COMMAND ${CMAKE_COMMAND} -E create_symlink ${_nccl_real_file} ${_real_link}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_odd_dir}
  COMMAND ${CMAKE_COMMAND} -E create_symlink ${_nccl_real_file} ${_odd_link}
  VERBATIM)

add_test(NAME shim_dlopen.by_path COMMAND shim_dlopen_nccl path ${_lamport_so})
add_test(NAME shim_dlopen.abs_path_audit COMMAND shim_dlopen_nccl abs-path-audit ${_lamport_so} ${_real_link})
add_test(NAME shim_dlopen.odd_path_audit COMMAND shim_dlopen_nccl abs-path-audit ${_lamport_so} ${_odd_link})
add_test(NAME shim_dlopen.by_name_audit COMMAND shim_dlopen_nccl name-audit ${_lamport_so})
# NCCL_LAMPORT_NCCL_PATH given as the bare soname: under LD_AUDIT that name is ours (the redirect).
add_test(NAME shim_dlopen.by_name_audit_configured_soname COMMAND shim_dlopen_nccl name-audit ${_lamport_so})
set_tests_properties(shim_dlopen.by_name_audit_configured_soname PROPERTIES LABELS cpu
  ENVIRONMENT "${_nccl_env};LD_AUDIT=${_audit_so};NCCL_LAMPORT_NCCL_PATH=libnccl.so.2")
# LD_AUDIT given relative to the test's directory; the program then leaves that directory.
file(RELATIVE_PATH _audit_so_relative ${CMAKE_CURRENT_BINARY_DIR} ${_audit_so})
add_test(NAME shim_dlopen.relative_audit_chdir COMMAND shim_dlopen_nccl chdir-name-audit ${_lamport_so})
set_tests_properties(shim_dlopen.relative_audit_chdir PROPERTIES LABELS cpu
  ENVIRONMENT "${_nccl_env};LD_AUDIT=./${_audit_so_relative}")
add_test(NAME shim_dlopen.by_name_real COMMAND shim_dlopen_nccl name-real)
add_test(NAME shim_dlopen.self_as_nccl_path COMMAND shim_dlopen_nccl self ${_lamport_so})
set_tests_properties(shim_dlopen.by_path shim_dlopen.by_name_real PROPERTIES ENVIRONMENT "${_nccl_env}")
set_tests_properties(shim_dlopen.by_name_audit shim_dlopen.abs_path_audit shim_dlopen.odd_path_audit PROPERTIES
  ENVIRONMENT "${_nccl_env};LD_AUDIT=${_audit_so}")
set_tests_properties(shim_dlopen.self_as_nccl_path PROPERTIES
  ENVIRONMENT "${_nccl_env};NCCL_LAMPORT_NCCL_PATH=${_self_link}")
# Our object loaded by path first, then "libnccl.so.2" under LD_AUDIT: the redirect gives the same
# object, and the plugin's own dlopen("libnccl.so.2") is let through by the audit module (the
# debug line proves it took that way, not the prefixed-name fallback).
add_test(NAME shim_dlopen.path_then_name_audit
  COMMAND sh -c "out=$(\"$0\" path-then-name-audit \"$1\" 2>&1); rc=$?; printf '%s\\n' \"$out\"; [ $rc -eq 0 ] && printf '%s' \"$out\" | grep -q 'requested by libnccl-lamport.so itself: not redirected'"
          $<TARGET_FILE:shim_dlopen_nccl> ${_lamport_so})
set_tests_properties(shim_dlopen.path_then_name_audit PROPERTIES
  ENVIRONMENT "${_nccl_env};LD_AUDIT=${_audit_so};NCCL_LAMPORT_AUDIT_DEBUG=1")
# The forwarders in front of the real NCCL: its host-only device-API helpers answer as called directly.
add_test(NAME shim_opaque.real_nccl COMMAND shim_opaque_calls real ${_lamport_so})
set_tests_properties(shim_opaque.real_nccl PROPERTIES LABELS cpu ENVIRONMENT "${_nccl_env}")
# A program linked against NCCL (as libtorch_cuda.so) that refers to those exports starts under
# LD_AUDIT, with every symbol bound at start-up (LD_BIND_NOW), and reaches the real NCCL.
add_executable(shim_linked_nccl ${_shim}/linked_nccl.c)
target_link_libraries(shim_linked_nccl PRIVATE ${NCCL_LIBRARY} ${CMAKE_DL_LIBS})
target_include_directories(shim_linked_nccl PRIVATE ${PROJECT_SOURCE_DIR})
add_dependencies(shim_linked_nccl nccl-lamport nccl-lamport-audit)
add_test(NAME shim_opaque.linked_audit COMMAND shim_linked_nccl)
set_tests_properties(shim_opaque.linked_audit PROPERTIES LABELS cpu
  ENVIRONMENT "${_nccl_env};LD_AUDIT=${_audit_so};LD_BIND_NOW=1")
set_tests_properties(shim_dlopen.by_path shim_dlopen.by_name_audit shim_dlopen.abs_path_audit shim_dlopen.odd_path_audit
                     shim_dlopen.by_name_real shim_dlopen.self_as_nccl_path shim_dlopen.path_then_name_audit PROPERTIES LABELS cpu)

# What vLLM's / SGLang's pynccl does with VLLM_NCCL_SO_PATH / SGLANG_NCCL_SO_PATH (ctypes).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME shim_ctypes.by_path COMMAND Python3::Interpreter ${_shim}/ctypes_shim_check.py ${_lamport_so})
  add_test(NAME shim_ctypes.by_name_audit COMMAND Python3::Interpreter ${_shim}/ctypes_shim_check.py --by-name)
  set_tests_properties(shim_ctypes.by_path PROPERTIES LABELS cpu ENVIRONMENT "${_nccl_env}")
  set_tests_properties(shim_ctypes.by_name_audit PROPERTIES LABELS cpu
                       ENVIRONMENT "${_nccl_env};LD_AUDIT=${_audit_so}")
else()
  message(STATUS "python3 not found: shim_ctypes tests not registered")
endif()

# LD_AUDIT and the requester's own search path (tests/shim/runpath_check.c): the only libnccl.so.2
# a program reaches through its DT_RUNPATH / DT_RPATH (a fake, 2.99.99, in a directory nothing else
# names) must be the NCCL behind libnccl-lamport.so. Linked (DT_NEEDED, as libtorch_cuda.so) and
# dlopen by name, each with a RUNPATH and with an RPATH; "stock" runs show the fake is reachable.
# RUNPATH comes after LD_LIBRARY_PATH, so those runs have none (the real NCCL stays reachable
# through ld.so.cache); an RPATH comes first, so those runs have the real NCCL on LD_LIBRARY_PATH.
set(_runpath_dir ${CMAKE_CURRENT_BINARY_DIR}/runpath_nccl)
add_library(runpath_fake_nccl SHARED ${_shim}/runpath_fake_nccl.c)
target_link_libraries(runpath_fake_nccl PRIVATE nccl_headers)
set_target_properties(runpath_fake_nccl PROPERTIES C_VISIBILITY_PRESET default PREFIX lib OUTPUT_NAME nccl
                      SUFFIX .so.2 LIBRARY_OUTPUT_DIRECTORY ${_runpath_dir})
foreach(_how linked dlopen)
  foreach(_tag runpath rpath)
    set(_exe shim_runpath_${_how}_${_tag})
    add_executable(${_exe} ${_shim}/runpath_check.c)
    target_include_directories(${_exe} PRIVATE ${PROJECT_SOURCE_DIR})
    target_link_libraries(${_exe} PRIVATE ${CMAKE_DL_LIBS})
    if(_how STREQUAL "linked")
      target_compile_definitions(${_exe} PRIVATE RUNPATH_LINKED)
      target_link_libraries(${_exe} PRIVATE runpath_fake_nccl)
    endif()
    if(_tag STREQUAL "runpath")
      target_link_options(${_exe} PRIVATE "LINKER:--enable-new-dtags" "LINKER:-rpath,${_runpath_dir}")
      set(_env "LD_LIBRARY_PATH=")
    else()
      target_link_options(${_exe} PRIVATE "LINKER:--disable-new-dtags" "LINKER:-rpath,${_runpath_dir}")
      set(_env "LD_LIBRARY_PATH=${_nccl_dir}")
    endif()
    # Only the search path set above: no CMake build RPATH beside it.
    set_target_properties(${_exe} PROPERTIES SKIP_BUILD_RPATH ON)
    add_dependencies(${_exe} runpath_fake_nccl nccl-lamport nccl-lamport-audit)
    list(APPEND _env "NCCL_DEBUG=WARN" "NCCL_LAMPORT_NCCL_PATH=")
    add_test(NAME shim_runpath.${_how}_${_tag} COMMAND ${_exe} audit ${_runpath_dir}/libnccl.so.2)
    add_test(NAME shim_runpath.${_how}_${_tag}_stock COMMAND ${_exe} stock ${_runpath_dir}/libnccl.so.2)
    set_tests_properties(shim_runpath.${_how}_${_tag} PROPERTIES LABELS cpu
                         ENVIRONMENT "${_env};LD_AUDIT=${_audit_so};NCCL_LAMPORT_AUDIT_DEBUG=1")
    set_tests_properties(shim_runpath.${_how}_${_tag}_stock PROPERTIES LABELS cpu ENVIRONMENT "${_env}")
  endforeach()
endforeach()
