# Self-registration as NCCL's tuner (plugin/loader/self_register.cc), seen from a preloaded
# process's own environment (label cpu): a shell runs with the object preloaded and prints what
# the constructor left in NCCL_TUNER_PLUGIN ("<unset>" when nothing). Every spelling of
# NCCL_LAMPORT_ENABLE=off, and any value the switch does not know, must leave it unset (the A/B run
# sees stock NCCL); on by default and for every spelling of on, it must be our path. The printed
# line names only NCCL_TUNER_PLUGIN, never the variable the test sets, so a pattern cannot match
# the test's own setting. Included from tests/CMakeLists.txt.
find_program(NCCL_LAMPORT_SH_PROGRAM sh REQUIRED)
set(_preload_so ${PROJECT_BINARY_DIR}/lib/libnccl-lamport.so)
set(_print_tuner "printf 'tuner plugin: %s\\n' \"\${NCCL_TUNER_PLUGIN-<unset>}\"")

add_test(NAME self_register.on_by_default COMMAND ${NCCL_LAMPORT_SH_PROGRAM} -c "${_print_tuner}")
set_tests_properties(self_register.on_by_default PROPERTIES LABELS cpu
  ENVIRONMENT "LD_PRELOAD=${_preload_so}" PASS_REGULAR_EXPRESSION "tuner plugin: /[^\n]*libnccl-lamport\\.so")
foreach(_on 1 true ON Yes)
  add_test(NAME self_register.enable_${_on} COMMAND ${NCCL_LAMPORT_SH_PROGRAM} -c "${_print_tuner}")
  set_tests_properties(self_register.enable_${_on} PROPERTIES LABELS cpu
    ENVIRONMENT "LD_PRELOAD=${_preload_so};NCCL_LAMPORT_ENABLE=${_on}"
    PASS_REGULAR_EXPRESSION "tuner plugin: /[^\n]*libnccl-lamport\\.so")
endforeach()
foreach(_off 0 false NO off Off bogus)
  add_test(NAME self_register.enable_${_off} COMMAND ${NCCL_LAMPORT_SH_PROGRAM} -c "${_print_tuner}")
  set_tests_properties(self_register.enable_${_off} PROPERTIES LABELS cpu
    ENVIRONMENT "LD_PRELOAD=${_preload_so};NCCL_LAMPORT_ENABLE=${_off}" PASS_REGULAR_EXPRESSION "tuner plugin: <unset>")
endforeach()
