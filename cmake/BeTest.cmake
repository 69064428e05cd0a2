# BeTest.cmake - how tests are registered (test/*/CMakeLists.txt).
#
# be_add_test(NAME SOURCES a.c [b.c] [TARGET t] [ARGS ...] [LABELS ...]
#             [TIMEOUT s])
#   builds TARGET (default test-NAME) from SOURCES linked with the static
#   library, once, and registers it as ctest NAME.
# be_transport_test(PREFIX BEHAVIOUR [TRANSPORTS t...] [LABELS ...]
#                   [TIMEOUT s] [LINK lib...] [SOURCE f] [NAME n]
#                   [VARIANT v ARGS ...])
#   one behaviour run on each transport: test-PREFIX-BEHAVIOUR (from
#   SOURCE, default test-PREFIX-BEHAVIOUR.c) registered as
#   PREFIX-<transport>-BEHAVIOUR (or NAME) with --transport <transport>,
#   label PREFIX; exit 77 is a skip. A VARIANT is the same program run
#   with ARGS as well, registered as PREFIX-<transport>-BEHAVIOUR-v.
# be_rxe_test(NAME TARGET TIMEOUT [LABELS ...] [GUEST opt...] [ARGS ...])
#   TARGET run inside the Soft-RoCE QEMU guest by test/rxe/rxe-run, for at
#   most TIMEOUT seconds, with the guest's open-file limit raised (label
#   rxe; one guest at a time). It skips (77) only when qemu-system-x86_64
#   is not installed at all; a guest that fails to boot fails the test.
# be_test_library(NAME SOURCES a.c [b.c] [LINK lib...])
#   a folder's test harness as the static library NAME, linked with LINK
#   (default the static library), with src/ and test/ as include paths
#   for the tests that link it.

function(be_test_library name)
  cmake_parse_arguments(L "" "" "SOURCES;LINK" ${ARGN})
  if(NOT L_LINK)
    set(L_LINK be_static)
  endif()
  add_library(${name} STATIC ${L_SOURCES})
  target_link_libraries(${name} PUBLIC ${L_LINK})
  target_include_directories(${name} PUBLIC ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/test)
  target_compile_definitions(${name} PRIVATE BE_HAVE_VERBS=${BE_HAVE_VERBS})
  be_target_warnings(${name})
endfunction()

function(be_add_test name)
  cmake_parse_arguments(T "" "TIMEOUT;TARGET" "SOURCES;ARGS;LABELS" ${ARGN})
  if(NOT T_TARGET)
    set(T_TARGET test-${name})
  endif()
  if(NOT TARGET ${T_TARGET})
    add_executable(${T_TARGET} ${T_SOURCES})
    target_link_libraries(${T_TARGET} PRIVATE be_static)
    target_include_directories(${T_TARGET} PRIVATE ${PROJECT_SOURCE_DIR}/src ${PROJECT_SOURCE_DIR}/test)
    target_compile_definitions(${T_TARGET} PRIVATE BE_HAVE_VERBS=${BE_HAVE_VERBS})
    be_target_warnings(${T_TARGET})
  endif()
  add_test(NAME ${name} COMMAND ${T_TARGET} ${T_ARGS})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  set_tests_properties(${name} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

function(be_transport_test prefix behaviour)
  cmake_parse_arguments(T "" "TIMEOUT;SOURCE;NAME;VARIANT" "TRANSPORTS;LABELS;LINK;ARGS" ${ARGN})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 120)
  endif()
  if(NOT T_SOURCE)
    set(T_SOURCE test-${prefix}-${behaviour}.c)
  endif()
  set(target test-${prefix}-${behaviour})
  foreach(transport ${T_TRANSPORTS})
    set(name ${prefix}-${transport}-${behaviour})
    if(NOT "${T_VARIANT}" STREQUAL "") # "off" is false to if()
      set(name ${name}-${T_VARIANT})
    endif()
    if(T_NAME)
      set(name ${T_NAME})
    endif()
    be_add_test(${name} TARGET ${target} SOURCES ${T_SOURCE} ARGS --transport ${transport} ${T_ARGS}
      LABELS ${prefix} ${T_LABELS} TIMEOUT ${T_TIMEOUT})
    set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
  endforeach()
  if(T_LINK)
    target_link_libraries(${target} PRIVATE ${T_LINK})
  endif()
endfunction()

function(be_rxe_test name target timeout)
  cmake_parse_arguments(R "" "" "LABELS;GUEST;ARGS" ${ARGN})
  set(rxe_run ${PROJECT_SOURCE_DIR}/test/rxe/rxe-run)
  if(NOT EXISTS ${rxe_run})
    return()
  endif()
  math(EXPR guard "${timeout} + 60")
  list(JOIN R_GUEST " " R_GUEST)
  set(labels rxe ${R_LABELS})
  add_test(NAME ${name} COMMAND sh -c
    "command -v qemu-system-x86_64 >/dev/null || { echo 'qemu-system-x86_64 not installed: skipped'; exit 77; }; exec \"$0\" --timeout ${timeout} ${R_GUEST} -- sh -c 'ulimit -n 65536; exec \"$@\"' sh \"$@\""
    ${rxe_run} $<TARGET_FILE:${target}> ${R_ARGS})
  set_tests_properties(${name} PROPERTIES TIMEOUT ${guard} LABELS "${labels}"
    SKIP_RETURN_CODE 77 RESOURCE_LOCK rxe-guest)
endfunction()
