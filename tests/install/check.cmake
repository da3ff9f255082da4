# Configures, builds and runs tests/install/consumer against the scratch
# prefix the install_prefix fixture filled, with find_package(jaccl).
#   cmake -DSRC=<source> -DPREFIX=<prefix> -DWORK=<scratch> -P check.cmake
file(REMOVE_RECURSE ${WORK})
execute_process(COMMAND ${CMAKE_COMMAND} -S ${SRC}/tests/install/consumer
                        -B ${WORK} -DCMAKE_PREFIX_PATH=${PREFIX}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "find_package(jaccl) project failed to configure (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK} RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "consumer failed to build (${rc})")
endif()
execute_process(COMMAND ${WORK}/consumer RESULT_VARIABLE rc
                OUTPUT_VARIABLE out)
message(STATUS "${out}")
if(NOT rc EQUAL 0 OR NOT out MATCHES "consumer OK")
  message(FATAL_ERROR "consumer failed (${rc}): ${out}")
endif()
