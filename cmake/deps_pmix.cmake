# Optional side channel: pmix:// (PMIx, Debian's libpmix-dev).
#
# Included from cmake/optional_deps.cmake after the `jaccl` target exists.
# Found -> libjaccl-pmix.so, a plugin (linked into a static libjaccl:
# cmake/channel_plugins.cmake) and JACCL_HAVE_PMIX=1; missing
# -> src/bootstrap/pmix_channel.cpp still compiles and pmix:// raises a
# ConfigError saying to install libpmix-dev.
#
#   -DJACCL_WITH_PMIX=OFF   never build the pmix:// channel
#
# Debian installs PMIx under /usr/lib/<triplet>/pmix2 (include/, lib/) and a
# pkg-config file "pmix"; accept either.

option(JACCL_WITH_PMIX "Build the pmix:// side channel when PMIx is found" ON)
set(JACCL_HAVE_PMIX OFF)

if(JACCL_WITH_PMIX)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(JACCL_PC_PMIX QUIET pmix)
  endif()
  find_path(JACCL_PMIX_INCLUDE_DIR pmix.h
    HINTS ${JACCL_PC_PMIX_INCLUDE_DIRS}
    PATH_SUFFIXES pmix2/include)
  find_library(JACCL_PMIX_LIBRARY NAMES pmix
    HINTS ${JACCL_PC_PMIX_LIBRARY_DIRS}
    PATH_SUFFIXES pmix2/lib)
  if(JACCL_PMIX_INCLUDE_DIR AND JACCL_PMIX_LIBRARY)
    set(JACCL_HAVE_PMIX ON)
    jaccl_add_channel(pmix INCLUDES ${JACCL_PMIX_INCLUDE_DIR}
                           LIBS ${JACCL_PMIX_LIBRARY})
  endif()
endif()

if(JACCL_HAVE_PMIX)
  message(STATUS "jaccl side channel built: pmix:// (${JACCL_PMIX_LIBRARY})")
elseif(JACCL_WITH_PMIX)
  message(STATUS "jaccl side channel not built: pmix:// (install libpmix-dev, or run scripts/setup.sh, and reconfigure)")
else()
  message(STATUS "jaccl side channel not built: pmix:// (disabled: -DJACCL_WITH_PMIX=ON to build it)")
endif()
