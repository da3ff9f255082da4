# Optional side channels: redis:// (hiredis) and mpi:// (MPI).
#
# Included by the root CMakeLists.txt after the `jaccl` target exists. Each
# dependency that is found becomes a plugin of the shared libjaccl (or is
# linked into a static one: cmake/channel_plugins.cmake) and is announced
# with a compile definition (JACCL_HAVE_REDIS=1 / JACCL_HAVE_MPI=1); the
# channel's sources compile either way and, without the dependency, raise a
# ConfigError that says how to enable it.
#
#   -DJACCL_WITH_REDIS=OFF   never build the redis:// channel
#   -DJACCL_WITH_MPI=OFF     never build the mpi:// channel

include(${CMAKE_CURRENT_LIST_DIR}/channel_plugins.cmake)

option(JACCL_WITH_REDIS "Build the redis:// side channel when hiredis is found" ON)
option(JACCL_WITH_MPI "Build the mpi:// side channel when MPI is found" ON)

set(JACCL_HAVE_REDIS OFF)
set(JACCL_HAVE_MPI OFF)

# ---- hiredis -----------------------------------------------------------
# Debian's libhiredis-dev ships an old-style HiredisConfig.cmake (variables,
# no imported target) and a pkg-config file; accept either.
if(JACCL_WITH_REDIS)
  find_path(JACCL_HIREDIS_INCLUDE_DIR hiredis/hiredis.h)
  find_library(JACCL_HIREDIS_LIBRARY NAMES hiredis)
  if(NOT (JACCL_HIREDIS_INCLUDE_DIR AND JACCL_HIREDIS_LIBRARY))
    find_package(PkgConfig QUIET)
    if(PKG_CONFIG_FOUND)
      pkg_check_modules(JACCL_PC_HIREDIS QUIET hiredis)
      if(JACCL_PC_HIREDIS_FOUND)
        find_path(JACCL_HIREDIS_INCLUDE_DIR hiredis/hiredis.h
          HINTS ${JACCL_PC_HIREDIS_INCLUDE_DIRS}/..)
        find_library(JACCL_HIREDIS_LIBRARY NAMES hiredis
          HINTS ${JACCL_PC_HIREDIS_LIBRARY_DIRS})
      endif()
    endif()
  endif()
  if(JACCL_HIREDIS_INCLUDE_DIR AND JACCL_HIREDIS_LIBRARY)
    set(JACCL_HAVE_REDIS ON)
    jaccl_add_channel(redis INCLUDES ${JACCL_HIREDIS_INCLUDE_DIR}
                            LIBS ${JACCL_HIREDIS_LIBRARY})
  endif()
endif()

# ---- MPI ---------------------------------------------------------------
if(JACCL_WITH_MPI)
  # The project enables CXX only: use MPI's CXX component, without the
  # deprecated C++ bindings (we call the C API).
  set(MPI_CXX_SKIP_MPICXX ON)
  find_package(MPI QUIET COMPONENTS CXX)
  if(MPI_CXX_FOUND)
    set(JACCL_HAVE_MPI ON)
    jaccl_add_channel(mpi LIBS MPI::MPI_CXX)
  endif()
endif()

# ---- report --------------------------------------------------------------
set(_jaccl_built "tcp:// file://")
set(_jaccl_missing "")
if(JACCL_HAVE_REDIS)
  string(APPEND _jaccl_built " redis://")
elseif(JACCL_WITH_REDIS)
  list(APPEND _jaccl_missing
    "redis:// (install libhiredis-dev, or run scripts/setup.sh, and reconfigure)")
else()
  list(APPEND _jaccl_missing "redis:// (disabled: -DJACCL_WITH_REDIS=ON to build it)")
endif()
if(JACCL_HAVE_MPI)
  string(APPEND _jaccl_built " mpi://")
elseif(JACCL_WITH_MPI)
  list(APPEND _jaccl_missing
    "mpi:// (install libopenmpi-dev openmpi-bin, or run scripts/setup.sh, and reconfigure)")
else()
  list(APPEND _jaccl_missing "mpi:// (disabled: -DJACCL_WITH_MPI=ON to build it)")
endif()
message(STATUS "jaccl side channels built: ${_jaccl_built}")
foreach(_m IN LISTS _jaccl_missing)
  message(STATUS "jaccl side channel not built: ${_m}")
endforeach()
unset(_jaccl_built)
unset(_jaccl_missing)

include(${CMAKE_CURRENT_LIST_DIR}/deps_pmix.cmake)
