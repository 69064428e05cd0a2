# check-json.cmake - run be-perf and check its --json output.
#
#   cmake -DBE_PERF=path -DARGS="raw-lat --transport tcp ... --json"
#         -DEXPECT=raw-lat -P check-json.cmake
#
# Fails unless the command exits 0 and prints at least one line, every
# line a JSON object whose "test" is EXPECT and which has the keys every
# be-perf result carries.
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${BE_PERF} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 80)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "be-perf ${ARGS}: exit status '${rc}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
string(STRIP "${out}" out)
if(out STREQUAL "")
  message(FATAL_ERROR "be-perf ${ARGS}: no output\nstderr:\n${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
set(keys test transport size iters p50_us p99_us avg_us mb_s)
foreach(line IN LISTS lines)
  if(CMAKE_VERSION VERSION_LESS 3.19)
    # No JSON parser in this CMake: check the shape and the keys.
    if(NOT line MATCHES "^{.*}$")
      message(FATAL_ERROR "not a JSON object: ${line}")
    endif()
    foreach(k IN LISTS keys)
      if(NOT line MATCHES "\"${k}\":")
        message(FATAL_ERROR "key '${k}' missing: ${line}")
      endif()
    endforeach()
  else()
    foreach(k IN LISTS keys)
      string(JSON v ERROR_VARIABLE jerr GET "${line}" ${k})
      if(jerr)
        message(FATAL_ERROR "be-perf ${ARGS}: bad JSON or key '${k}' missing (${jerr}):\n${line}")
      endif()
    endforeach()
    string(JSON t GET "${line}" test)
    if(NOT t STREQUAL EXPECT)
      message(FATAL_ERROR "be-perf ${ARGS}: \"test\" is '${t}', want '${EXPECT}'")
    endif()
    string(JSON n GET "${line}" iters)
    if(n LESS_EQUAL 0)
      message(FATAL_ERROR "be-perf ${ARGS}: no iterations measured:\n${line}")
    endif()
  endif()
  message(STATUS "${line}")
endforeach()
