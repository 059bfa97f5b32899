# Tuner activation (docs/tuner-activation.md), label cpu: the entry hooks (plugin/hooks) against a stand-in
# library with NCCL-like prologue shapes and a stand-in NCCL that loads the tuner as NCCL does
# (x86-64 only: the engine reports "not capable" elsewhere); the host rendezvous
# (plugin/comm/host_rendezvous) and the displaced tuner's chaining (tuner/displaced_tuner) on
# every architecture.
if(NOT TARGET GTest::gtest_main)
  find_package(GTest REQUIRED)
endif()
include(GoogleTest)
set(_hooks ${CMAKE_CURRENT_LIST_DIR}/hooks)
if(CMAKE_SYSTEM_PROCESSOR MATCHES "x86_64|AMD64|amd64" AND TARGET lamport_hooks)
enable_language(ASM)

set_source_files_properties(${_hooks}/standin_cet.c PROPERTIES COMPILE_OPTIONS "-fcf-protection=full;-O2")
add_library(shim_hook_standin SHARED ${_hooks}/standin_entries.S ${_hooks}/standin_cet.c)
set_target_properties(shim_hook_standin PROPERTIES C_VISIBILITY_PRESET default)

add_executable(shim_entry_hooks ${_hooks}/test_entry_hooks.cc)
target_link_libraries(shim_entry_hooks PRIVATE lamport_hooks shim_hook_standin GTest::gtest_main
                                               Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(shim_entry_hooks PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(shim_entry_hooks PRIVATE STANDIN_LIBRARY="$<TARGET_FILE:shim_hook_standin>")
if(NCCL_LIBRARY)
  get_filename_component(_real_nccl ${NCCL_LIBRARY} REALPATH)
  target_compile_definitions(shim_entry_hooks PRIVATE REAL_NCCL_LIBRARY="${_real_nccl}")
endif()
gtest_discover_tests(shim_entry_hooks PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

add_executable(test_prologue_relocator ${_hooks}/test_prologue_relocator.cc)
target_link_libraries(test_prologue_relocator PRIVATE lamport_hooks GTest::gtest_main)
target_include_directories(test_prologue_relocator PRIVATE ${PROJECT_SOURCE_DIR})
gtest_discover_tests(test_prologue_relocator PROPERTIES LABELS cpu DISCOVERY_TIMEOUT 60)

# Tuner activation end to end: a stand-in NCCL 2.28 (endbr64 entries, pnccl aliases) that loads
# libnccl-lamport.so as its tuner from NCCL_TUNER_PLUGIN, the way NCCL does; no LD_PRELOAD.
set_source_files_properties(${_hooks}/tuner_standin_nccl.c PROPERTIES COMPILE_OPTIONS "-fcf-protection=full")
add_library(shim_tuner_standin_nccl SHARED ${_hooks}/tuner_standin_nccl.c)
target_link_libraries(shim_tuner_standin_nccl PRIVATE nccl_headers Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(shim_tuner_standin_nccl PROPERTIES C_VISIBILITY_PRESET hidden OUTPUT_NAME tuner_standin_nccl)
add_executable(shim_tuner_activation ${_hooks}/tuner_activation_check.c)
target_link_libraries(shim_tuner_activation PRIVATE shim_tuner_standin_nccl nccl_headers Threads::Threads ${CMAKE_DL_LIBS})
target_include_directories(shim_tuner_activation PRIVATE ${PROJECT_SOURCE_DIR})
target_compile_definitions(shim_tuner_activation PRIVATE STANDIN_NCCL="$<TARGET_FILE:shim_tuner_standin_nccl>")
# A second copy of the stand-in NCCL (another file), as a process with two NCCLs has (a framework
# with its own NCCL next to another's): it loads the same tuner.
add_library(shim_tuner_standin_nccl_copy SHARED ${_hooks}/tuner_standin_nccl.c)
target_link_libraries(shim_tuner_standin_nccl_copy PRIVATE nccl_headers Threads::Threads ${CMAKE_DL_LIBS})
set_target_properties(shim_tuner_standin_nccl_copy PROPERTIES C_VISIBILITY_PRESET hidden OUTPUT_NAME tuner_standin_nccl_copy)
target_compile_definitions(shim_tuner_activation PRIVATE STANDIN_NCCL_COPY="$<TARGET_FILE:shim_tuner_standin_nccl_copy>")
add_dependencies(shim_tuner_activation shim_tuner_standin_nccl_copy)
set_target_properties(shim_tuner_activation PROPERTIES ENABLE_EXPORTS ON)
add_dependencies(shim_tuner_activation nccl-lamport)
# NCCL_TUNER_PLUGIN alone: the hooks are on by default (NCCL_LAMPORT_TUNER_HOOKS=1).
set(_tuner_env "NCCL_TUNER_PLUGIN=${PROJECT_BINARY_DIR}/lib/libnccl-tuner-lamport.so;NCCL_DEBUG=WARN")
foreach(_case reach threads untouched-disabled untouched-denied untouched-opted-out cycles pair alone)
  string(REGEX REPLACE "-.*" "" _scenario ${_case})
  set(_args ${_scenario})
  if(_scenario STREQUAL "cycles")
    set(_args cycles 1000)
  endif()
  add_test(NAME shim_tuner_activation.${_case} COMMAND shim_tuner_activation ${_args})
  set_tests_properties(shim_tuner_activation.${_case} PROPERTIES LABELS cpu TIMEOUT 120
    ENVIRONMENT "${_tuner_env}" PASS_REGULAR_EXPRESSION "PASS ${_scenario}")
endforeach()
set_tests_properties(shim_tuner_activation.alone PROPERTIES ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS=1000")
set_tests_properties(shim_tuner_activation.untouched-disabled PROPERTIES ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_ENABLE=0")
set_tests_properties(shim_tuner_activation.untouched-denied PROPERTIES ENVIRONMENT "${_tuner_env};STANDIN_DENY_WX=1")
set_tests_properties(shim_tuner_activation.untouched-opted-out PROPERTIES ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_TUNER_HOOKS=0")

# Issue 9: at INFO, the per-communicator lines name the handle (at bind) or NCCL's commId (in
# the tuner's init), never "comm (nil)".
add_test(NAME shim_tuner_activation.lognames COMMAND shim_tuner_activation lognames)
set_tests_properties(shim_tuner_activation.lognames PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "NCCL_TUNER_PLUGIN=${PROJECT_BINARY_DIR}/lib/libnccl-tuner-lamport.so;NCCL_DEBUG=INFO"
  PASS_REGULAR_EXPRESSION "PASS lognames")

# Issue 9 point 5: NCCL ranks against the rendezvous order; the info reports NCCL's rank.
add_test(NAME shim_tuner_activation.reversed COMMAND shim_tuner_activation reversed)
set_tests_properties(shim_tuner_activation.reversed PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "NCCL_TUNER_PLUGIN=${PROJECT_BINARY_DIR}/lib/libnccl-tuner-lamport.so"
  PASS_REGULAR_EXPRESSION "PASS reversed")

# Two threads of one process initialise both ranks of one communicator at once (ncclCommInitAll,
# a thread per GPU): the rank whose init runs while the other installs the hooks is set up too.
add_test(NAME shim_tuner_activation.concurrent COMMAND shim_tuner_activation concurrent)
set_tests_properties(shim_tuner_activation.concurrent PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS=2000" PASS_REGULAR_EXPRESSION "PASS concurrent")

# A communicator whose init reaches the wrapper through a hook while the install is still writing
# (rank 1 a forked process): set up in the tuner's init with its peer, like any other.
add_test(NAME shim_tuner_activation.window COMMAND shim_tuner_activation window)
set_tests_properties(shim_tuner_activation.window PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS=2000" PASS_REGULAR_EXPRESSION "PASS window")

# Two NCCLs in one process: the one not hooked keeps its communicators; none of them is set up
# or described as ours (its calls never reach a wrapper).
add_test(NAME shim_tuner_activation.twocopies COMMAND shim_tuner_activation twocopies)
set_tests_properties(shim_tuner_activation.twocopies PROPERTIES LABELS cpu TIMEOUT 120
  ENVIRONMENT "${_tuner_env}" PASS_REGULAR_EXPRESSION "PASS twocopies")

# ctypes (pynccl's way): a CDLL handle and a function object taken before the first init.
find_program(PYTHON3 python3)
if(PYTHON3)
  add_test(NAME shim_tuner_activation.ctypes
    COMMAND ${PYTHON3} ${_hooks}/tuner_activation_ctypes.py $<TARGET_FILE:shim_tuner_standin_nccl>)
  set_tests_properties(shim_tuner_activation.ctypes PROPERTIES LABELS cpu TIMEOUT 60
    ENVIRONMENT "${_tuner_env}" PASS_REGULAR_EXPRESSION "PASS ctypes")
  # The same NCCL also reached through libnccl-lamport.so opened by path, before the tuner's
  # first init: the entries our wrappers already call must not be hooked.
  add_test(NAME shim_tuner_activation.by_path
    COMMAND ${PYTHON3} ${_hooks}/tuner_activation_by_path.py $<TARGET_FILE:shim_tuner_standin_nccl>
            ${PROJECT_BINARY_DIR}/lib/libnccl-lamport.so)
  set_tests_properties(shim_tuner_activation.by_path PROPERTIES LABELS cpu TIMEOUT 60
    ENVIRONMENT "${_tuner_env};NCCL_LAMPORT_NCCL_PATH=$<TARGET_FILE:shim_tuner_standin_nccl>;NCCL_LAMPORT_RENDEZVOUS_TIMEOUT_MS=1000"
    PASS_REGULAR_EXPRESSION "PASS by-path")
endif()

endif()  # x86-64

# The host-local rendezvous of tuner activation (plugin/comm/host_rendezvous), ranks as forked
# processes.
add_executable(test_host_rendezvous ${CMAKE_CURRENT_LIST_DIR}/../unit/test_host_rendezvous.cc
                                    ${PROJECT_SOURCE_DIR}/plugin/comm/host_rendezvous.cc)
target_include_directories(test_host_rendezvous PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(test_host_rendezvous PRIVATE GTest::gtest_main Threads::Threads)
gtest_discover_tests(test_host_rendezvous PROPERTIES LABELS cpu TIMEOUT 60 DISCOVERY_TIMEOUT 60)

# The tuner ours displaces keeps answering (tuner/displaced_tuner.h). One process per case.
# (shim_* names: tests/stage_for_device.sh stages only test_* binaries, and these need files and
# environment that only ctest gives them.)
add_library(shim_fake_displaced_tuner SHARED ${_hooks}/fake_displaced_tuner.c)
set_target_properties(shim_fake_displaced_tuner PROPERTIES C_VISIBILITY_PRESET hidden)
add_executable(shim_displaced_tuner ${CMAKE_CURRENT_LIST_DIR}/../unit/test_displaced_tuner.cc)
target_include_directories(shim_displaced_tuner PRIVATE ${PROJECT_SOURCE_DIR})
target_link_libraries(shim_displaced_tuner PRIVATE lamport_tuner_exports GTest::gtest_main ${CMAKE_DL_LIBS})
target_compile_definitions(shim_displaced_tuner PRIVATE FAKE_DISPLACED_TUNER="$<TARGET_FILE:shim_fake_displaced_tuner>")
add_dependencies(shim_displaced_tuner shim_fake_displaced_tuner)
set(_fake_tuner $<TARGET_FILE:shim_fake_displaced_tuner>)
set(_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_nccl.conf)
file(GENERATE OUTPUT ${_conf} CONTENT "# written by tests/shim/tuner_activation_tests.cmake\nNCCL_TUNER_PLUGIN=${_fake_tuner}\n")
foreach(_case TheNetPluginsTunerKeepsAnswering ANetPluginNotLoadedIsNotLoadedByUs NcclConfsTunerKeepsAnswering
              WithoutOneOurCostsAreNcclsAlone ConfParsing AV2ChoiceBecomesTheCheapestEntryAndNothingElse)
  add_test(NAME displaced_tuner.${_case} COMMAND shim_displaced_tuner --gtest_filter=DisplacedTuner.${_case})
  set_tests_properties(displaced_tuner.${_case} PROPERTIES LABELS cpu TIMEOUT 60
    ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()
set_tests_properties(displaced_tuner.TheNetPluginsTunerKeepsAnswering displaced_tuner.ANetPluginNotLoadedIsNotLoadedByUs
  PROPERTIES ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf;NCCL_NET_PLUGIN=${_fake_tuner}")
set_tests_properties(displaced_tuner.NcclConfsTunerKeepsAnswering PROPERTIES
  ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=${_conf}")

# One displaced-tuner case in a process of its own: displaced_tuner.<name> runs the gtest case
# DisplacedTuner.<case> in the environment env.
function(displaced_tuner_case name case env)
  add_test(NAME displaced_tuner.${name} COMMAND shim_displaced_tuner --gtest_filter=DisplacedTuner.${case})
  set_tests_properties(displaced_tuner.${name} PROPERTIES LABELS cpu TIMEOUT 60 ENVIRONMENT "${env}"
    FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endfunction()

# Displaced tuners that export only an older tuner ABI (v4, v3, v2: NCCL 2.21 - 2.27 builds, as
# aws-ofi-nccl has shipped) keep answering behind ours, called through their own ABI
# (tuner/chained_tuner.h): the same cases, against a fake built for that version alone. Behind
# NCCL 2.21 - 2.27 themselves (ours called through v2, v3, v4) each is chained where that NCCL
# accepts its struct version, by the net plugin and by nccl.conf.
foreach(_abi 4 3 2)
  add_library(shim_fake_displaced_tuner_v${_abi} SHARED ${_hooks}/fake_displaced_tuner.c)
  set_target_properties(shim_fake_displaced_tuner_v${_abi} PROPERTIES C_VISIBILITY_PRESET hidden)
  target_compile_definitions(shim_fake_displaced_tuner_v${_abi} PRIVATE FAKE_TUNER_ABI=${_abi})
  add_dependencies(shim_displaced_tuner shim_fake_displaced_tuner_v${_abi})
  set(_old_fake $<TARGET_FILE:shim_fake_displaced_tuner_v${_abi}>)
  set(_old_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_v${_abi}_nccl.conf)
  file(GENERATE OUTPUT ${_old_conf} CONTENT "# written by tests/shim/tuner_activation_tests.cmake\nNCCL_TUNER_PLUGIN=${_old_fake}\n")
  set(_by_net "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf;NCCL_NET_PLUGIN=${_old_fake};FAKE_EXPORTS=${_abi}")
  set(_by_conf "HOME=/nonexistent;NCCL_CONF_FILE=${_old_conf};FAKE_DISPLACED_TUNER=${_old_fake};FAKE_EXPORTS=${_abi}")
  foreach(_case TheNetPluginsTunerKeepsAnswering OlderNcclsChainTheNetPluginsTuner)
    displaced_tuner_case(v${_abi}-only.${_case} ${_case} "${_by_net}")
  endforeach()
  foreach(_case NcclConfsTunerKeepsAnswering OlderNcclsChainNcclConfsTuner)
    displaced_tuner_case(v${_abi}-only.${_case} ${_case} "${_by_conf}")
  endforeach()
endforeach()
# A FIFO named in nccl.conf (the test writes the conf), and a displaced tuner that chains back
# to ours (libnccl-lamport.so, a second copy in the process; its hooks stay off).
displaced_tuner_case(AFifoNamedInNcclConfIsNotOpened AFifoNamedInNcclConfIsNotOpened "HOME=/nonexistent")
if(TARGET nccl-lamport)
  displaced_tuner_case(ATunerThatChainsBackToOursEndsTheLoop ATunerThatChainsBackToOursEndsTheLoop
    "HOME=/nonexistent;NCCL_CONF_FILE=${_conf};FAKE_CHAIN_TO=$<TARGET_FILE:nccl-lamport>;NCCL_LAMPORT_TUNER_HOOKS=0")
  add_dependencies(shim_displaced_tuner nccl-lamport)
endif()
# A tuner with only v5..v7 is found, and chained by none of NCCL 2.21 - 2.27.
displaced_tuner_case(v5-v7.OlderNcclsChainTheNetPluginsTuner OlderNcclsChainTheNetPluginsTuner
  "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf;NCCL_NET_PLUGIN=${_fake_tuner};FAKE_EXPORTS=7")
set(_fake_v2 $<TARGET_FILE:shim_fake_displaced_tuner_v2>)
# libnccl-tuner.so exporting only v2, found through LD_LIBRARY_PATH.
set(_default_v2_dir ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_default_v2)
add_custom_command(TARGET shim_fake_displaced_tuner_v2 POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_default_v2_dir}
  COMMAND ${CMAKE_COMMAND} -E create_symlink ${_fake_v2} ${_default_v2_dir}/libnccl-tuner.so)

# Which tuner ours displaced, against what NCCL itself would have loaded without ours
# (src/misc/param.cc reads nccl.conf, src/plugin/tuner.cc and plugin_open.cc pick the library).
set(_none_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_none_nccl.conf)
file(GENERATE OUTPUT ${_none_conf} CONTENT "NCCL_TUNER_PLUGIN=None\n")
set(_notuner_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_notuner_nccl.conf)
file(GENERATE OUTPUT ${_notuner_conf} CONTENT "NCCL_TUNER_PLUGIN=libm.so.6\n")
set(_quiet_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_quiet_nccl.conf)
file(GENERATE OUTPUT ${_quiet_conf} CONTENT "NCCL_DEBUG=WARN\n")
set(_home_dir ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_home)
file(GENERATE OUTPUT ${_home_dir}/.nccl.conf CONTENT "NCCL_TUNER_PLUGIN=${_fake_tuner}\n")
# libnccl-tuner.so, NCCL's default tuner name, found through LD_LIBRARY_PATH.
set(_default_dir ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_default)
add_custom_command(TARGET shim_fake_displaced_tuner POST_BUILD
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_default_dir}
  COMMAND ${CMAKE_COMMAND} -E create_symlink $<TARGET_FILE:shim_fake_displaced_tuner> ${_default_dir}/libnccl-tuner.so)
# Another copy of nccl-lamport (not the same file), named in nccl.conf.
set(_tuner_copy_dir ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_lamport_copy)
add_custom_command(OUTPUT ${_tuner_copy_dir}/libnccl-tuner-lamport.so
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_tuner_copy_dir}
  COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:nccl-lamport> ${_tuner_copy_dir}/libnccl-tuner-lamport.so
  DEPENDS nccl-lamport)
add_custom_target(shim_displaced_lamport_copy DEPENDS ${_tuner_copy_dir}/libnccl-tuner-lamport.so)
add_dependencies(shim_displaced_tuner shim_displaced_lamport_copy)
set(_copy_conf ${CMAKE_CURRENT_BINARY_DIR}/displaced_tuner_copy_nccl.conf)
file(GENERATE OUTPUT ${_copy_conf} CONTENT "NCCL_TUNER_PLUGIN=${_tuner_copy_dir}/libnccl-tuner-lamport.so\n")
foreach(_case NoneInNcclConfTurnsTheNetPluginsTunerOffToo ANamedLibraryWithoutATunerEndsTheSearch
              NcclConfFileReplacesTheHomeConf TheDefaultTunerLibraryKeepsAnswering AnotherCopyOfOursIsNeverChained
              PluginNames AThrowingDisplacedFinalizeIsContained OlderNcclsLoaderRules)
  add_test(NAME displaced_tuner.${_case} COMMAND shim_displaced_tuner --gtest_filter=DisplacedTuner.${_case})
  set_tests_properties(displaced_tuner.${_case} PROPERTIES LABELS cpu TIMEOUT 60
    ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf" FAIL_REGULAR_EXPRESSION "\\[  SKIPPED \\]")
endforeach()
set_tests_properties(displaced_tuner.NoneInNcclConfTurnsTheNetPluginsTunerOffToo PROPERTIES
  ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=${_none_conf};NCCL_NET_PLUGIN=${_fake_tuner}")
set_tests_properties(displaced_tuner.ANamedLibraryWithoutATunerEndsTheSearch PROPERTIES
  ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=${_notuner_conf};NCCL_NET_PLUGIN=${_fake_tuner}")
set_tests_properties(displaced_tuner.NcclConfFileReplacesTheHomeConf PROPERTIES
  ENVIRONMENT "HOME=${_home_dir};NCCL_CONF_FILE=${_quiet_conf}")
set_tests_properties(displaced_tuner.TheDefaultTunerLibraryKeepsAnswering PROPERTIES
  ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=${_quiet_conf};LD_LIBRARY_PATH=${_default_dir}")
set_tests_properties(displaced_tuner.AnotherCopyOfOursIsNeverChained PROPERTIES
  ENVIRONMENT "HOME=/nonexistent;NCCL_CONF_FILE=${_copy_conf}")
# The same questions for NCCL 2.21 - 2.27, with a tuner that exports only v2 (which all of them
# accept).
displaced_tuner_case(TheDefaultTunerLibraryKeepsAnsweringOlderNccls TheDefaultTunerLibraryKeepsAnsweringOlderNccls
  "HOME=/nonexistent;NCCL_CONF_FILE=${_quiet_conf};LD_LIBRARY_PATH=${_default_v2_dir}")
displaced_tuner_case(NoneInNcclConfIsANameToOlderNccls NoneInNcclConfIsANameToOlderNccls
  "HOME=/nonexistent;NCCL_CONF_FILE=${_none_conf};NCCL_NET_PLUGIN=${_fake_v2}")
displaced_tuner_case(OlderNcclsOpenTheNetPluginThemselves OlderNcclsOpenTheNetPluginThemselves
  "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf;NCCL_NET_PLUGIN=${_fake_v2}")
# NCCL_NET_PLUGIN as a list (NCCL 2.27 on), its first a fake with tuner ABI v4 only.
displaced_tuner_case(ANetPluginListKeepsItsTunerAnswering ANetPluginListKeepsItsTunerAnswering
  "HOME=/nonexistent;NCCL_CONF_FILE=/nonexistent.conf;NCCL_NET_PLUGIN=$<TARGET_FILE:shim_fake_displaced_tuner_v4>,libnccl-net-absent.so")
displaced_tuner_case(AnotherCopyOfOursIsNeverChainedByOlderNccls AnotherCopyOfOursIsNeverChainedByOlderNccls
  "HOME=/nonexistent;NCCL_CONF_FILE=${_copy_conf};NCCL_NET_PLUGIN=${_fake_v2}")

# Another copy of nccl-lamport preloaded beside the tuner NCCL loads (a site-wide
# NCCL_TUNER_PLUGIN, a user's LD_PRELOAD build): the tuner copy says so and hooks nothing (both
# copies wrapped every call before).
set(_preloaded_copy_dir ${CMAKE_CURRENT_BINARY_DIR}/preloaded_lamport_copy)
add_custom_target(shim_preloaded_lamport_copy ALL
  COMMAND ${CMAKE_COMMAND} -E make_directory ${_preloaded_copy_dir}
  COMMAND ${CMAKE_COMMAND} -E copy_if_different $<TARGET_FILE:nccl-lamport> ${_preloaded_copy_dir}/libnccl-lamport.so
  DEPENDS nccl-lamport VERBATIM)
add_dependencies(shim_tuner_activation shim_preloaded_lamport_copy)
add_test(NAME shim_tuner_activation.preloadedcopy COMMAND shim_tuner_activation preloadedcopy)
set_tests_properties(shim_tuner_activation.preloadedcopy PROPERTIES LABELS cpu TIMEOUT 60
  ENVIRONMENT "${_tuner_env};NCCL_DEBUG=INFO;LD_PRELOAD=${_preloaded_copy_dir}/libnccl-lamport.so"
  PASS_REGULAR_EXPRESSION "already wraps NCCL in this process.*PASS preloadedcopy"
  FAIL_REGULAR_EXPRESSION "entry points of .* hooked")

# The A/B switch under NCCL_TUNER_PLUGIN: the INFO line says the path is off and NCCL untouched,
# and gives no LD_PRELOAD advice (which would not turn it on).
add_test(NAME shim_tuner_activation.disabled-notice COMMAND shim_tuner_activation untouched)
set_tests_properties(shim_tuner_activation.disabled-notice PROPERTIES LABELS cpu TIMEOUT 60
  ENVIRONMENT "NCCL_TUNER_PLUGIN=${PROJECT_BINARY_DIR}/lib/libnccl-tuner-lamport.so;NCCL_DEBUG=INFO;NCCL_LAMPORT_ENABLE=0"
  PASS_REGULAR_EXPRESSION "Lamport path is off \\(NCCL_LAMPORT_ENABLE=0\\): NCCL's code is not patched"
  FAIL_REGULAR_EXPRESSION "start it with LD_PRELOAD")
