# Builds tests/install/subproject (jaccl through FetchContent, SOURCE_DIR)
# and checks that jaccl behaves as a subproject: it adds the library (and
# its side-channel plugins) and nothing else (no tests, tools, module, examples, benchmarks), sets none of
# the parent's globals (build type, shared-library default, compile
# database), and the consumer links and runs.
#   cmake -DSRC=<jaccl source> -DWORK=<scratch> [-DLAUNCHER=ccache] -P check_subproject.cmake
file(REMOVE_RECURSE ${WORK})
set(args -S ${SRC}/tests/install/subproject -B ${WORK} -DJACCL_SOURCE=${SRC})
if(LAUNCHER)
  list(APPEND args -DCMAKE_CXX_COMPILER_LAUNCHER=${LAUNCHER})
endif()
if(GENERATOR)
  list(APPEND args -G ${GENERATOR})
endif()
execute_process(COMMAND ${CMAKE_COMMAND} ${args} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the FetchContent project failed to configure (${rc})")
endif()

file(STRINGS ${WORK}/targets.txt targets)
# A shared libjaccl's side-channel plugins (cmake/channel_plugins.cmake) are
# part of the library.
list(FILTER targets EXCLUDE REGEX "^jaccl-(mpi|pmix|redis)$")
if(NOT targets STREQUAL "consumer;jaccl")
  message(FATAL_ERROR "as a subproject jaccl must define only its library; "
                      "the build has the targets: ${targets}")
endif()
file(STRINGS ${WORK}/CMakeCache.txt cache)
foreach(line IN LISTS cache)
  if(line MATCHES "^CMAKE_BUILD_TYPE:[A-Z]+=(.+)$")
    message(FATAL_ERROR "the subproject set the parent's build type to '${CMAKE_MATCH_1}'")
  endif()
  if(line MATCHES "^(BUILD_SHARED_LIBS|CMAKE_EXPORT_COMPILE_COMMANDS|CMAKE_INSTALL_RPATH|CMAKE_CXX_FLAGS|CMAKE_CXX_STANDARD):[A-Z]+=(.+)$")
    message(FATAL_ERROR "the subproject put ${CMAKE_MATCH_1}=${CMAKE_MATCH_2} in the parent's cache")
  endif()
endforeach()
if(EXISTS ${WORK}/compile_commands.json)
  message(FATAL_ERROR "the subproject turned on the parent's compile database")
endif()
if(EXISTS ${WORK}/CTestTestfile.cmake OR EXISTS ${WORK}/_deps/jaccl-build/CTestTestfile.cmake)
  message(FATAL_ERROR "the subproject enabled testing in the parent's build")
endif()

execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the FetchContent consumer failed to build (${rc})")
endif()
execute_process(COMMAND ${WORK}/consumer RESULT_VARIABLE rc OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "consumer OK")
  message(FATAL_ERROR "the FetchContent consumer failed (${rc}): ${out}")
endif()
