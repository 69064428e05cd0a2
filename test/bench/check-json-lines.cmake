# check-json-lines.cmake - run a benchmark program and check its --json lines.
#
#   cmake -DPROG=path -DARGS="lat --iters 300 --json" -DFIELD=test
#         -DEXPECT=rpc-lat -DKEYS=a,b,c [-DPOSITIVE=a,b] [-DZERO=c]
#         -P check-json-lines.cmake
#
# Fails unless PROG exits 0 and prints at least one line, every line a JSON
# object whose FIELD is EXPECT, which has every key of KEYS, whose POSITIVE
# keys are numbers > 0 and whose ZERO keys are 0. (test/perf/check-json.cmake
# does the same for be-perf, whose lines all say "test"; the fetch lines of
# issue 16 say "experiment", hence FIELD.)
cmake_minimum_required(VERSION 3.19) # string(JSON)
separate_arguments(args UNIX_COMMAND "${ARGS}")
execute_process(COMMAND ${PROG} ${args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err TIMEOUT 100)
if(NOT rc STREQUAL "0")
  message(FATAL_ERROR "${PROG} ${ARGS}: exit status '${rc}'\nstdout:\n${out}\nstderr:\n${err}")
endif()
string(STRIP "${out}" out)
if(out STREQUAL "")
  message(FATAL_ERROR "${PROG} ${ARGS}: no output\nstderr:\n${err}")
endif()
string(REPLACE "\n" ";" lines "${out}")
string(REPLACE "," ";" keys "${KEYS}")
string(REPLACE "," ";" positive "${POSITIVE}")
string(REPLACE "," ";" zero "${ZERO}")
foreach(line IN LISTS lines)
  foreach(k IN LISTS keys positive zero)
    string(JSON v ERROR_VARIABLE jerr GET "${line}" ${k})
    if(jerr)
      message(FATAL_ERROR "bad JSON or key '${k}' missing (${jerr}):\n${line}")
    endif()
  endforeach()
  string(JSON v GET "${line}" ${FIELD})
  if(NOT v STREQUAL EXPECT)
    message(FATAL_ERROR "\"${FIELD}\" is '${v}', want '${EXPECT}':\n${line}")
  endif()
  foreach(k IN LISTS positive)
    string(JSON v GET "${line}" ${k})
    if(NOT v MATCHES "^[0-9.eE+]+$" OR v EQUAL 0)
      message(FATAL_ERROR "'${k}' is '${v}', want a number > 0:\n${line}")
    endif()
  endforeach()
  foreach(k IN LISTS zero)
    string(JSON v GET "${line}" ${k})
    if(NOT v EQUAL 0)
      message(FATAL_ERROR "'${k}' is '${v}', want 0:\n${line}\nstderr:\n${err}")
    endif()
  endforeach()
  message(STATUS "${line}")
endforeach()
