# Optional data plane: the `ofi` transport over libfabric (Debian
# libfabric-dev). Included by the root CMakeLists.txt after the `jaccl` target
# exists. Found -> JACCL_HAVE_OFI=1 and the headers; the library itself is
# opened with dlopen on first use (src/transport/ofi/ofi_lib.h says why), so
# libjaccl does not link it and runs where it is absent; missing ->
# src/transport/ofi still compiles, ofi::built() is false and opening a domain
# raises a ConfigError saying to install libfabric-dev.
#
#   -DJACCL_WITH_OFI=OFF   never build the ofi transport
#   -DJACCL_OFI_SHM_LOCK_RESCUE=OFF   no shm lock rescue
#     (src/transport/ofi/shm_lock_rescue.h: it writes into libfabric's
#     private shm region header, and only runs on libfabric versions whose
#     layout it knows; without it a rank SIGKILLed inside the provider's
#     region lock can hang its peers)

option(JACCL_WITH_OFI "Build the ofi (libfabric) transport when libfabric is found" ON)
option(JACCL_OFI_SHM_LOCK_RESCUE "Release libfabric shm region locks a killed rank left held (known region layouts only)" ON)
set(JACCL_HAVE_OFI OFF)

if(JACCL_WITH_OFI)
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(JACCL_PC_FABRIC QUIET libfabric)
  endif()
  find_path(JACCL_FABRIC_INCLUDE_DIR rdma/fabric.h HINTS ${JACCL_PC_FABRIC_INCLUDE_DIRS})
  find_library(JACCL_FABRIC_LIBRARY NAMES fabric HINTS ${JACCL_PC_FABRIC_LIBRARY_DIRS})
  if(JACCL_FABRIC_INCLUDE_DIR AND JACCL_FABRIC_LIBRARY)
    set(JACCL_HAVE_OFI ON)
    target_include_directories(jaccl PRIVATE ${JACCL_FABRIC_INCLUDE_DIR})
    target_link_libraries(jaccl PRIVATE ${CMAKE_DL_LIBS})
    target_compile_definitions(jaccl PRIVATE JACCL_HAVE_OFI=1)
    if(JACCL_OFI_SHM_LOCK_RESCUE)
      target_compile_definitions(jaccl PRIVATE JACCL_OFI_SHM_LOCK_RESCUE=1)
    endif()
  endif()
endif()

if(JACCL_HAVE_OFI)
  if(JACCL_PC_FABRIC_VERSION)
    message(STATUS "jaccl data plane built: ofi (libfabric ${JACCL_PC_FABRIC_VERSION})")
  else()
    message(STATUS "jaccl data plane built: ofi (libfabric)")
  endif()
elseif(JACCL_WITH_OFI)
  message(STATUS "jaccl data plane not built: ofi (install libfabric-dev, or run scripts/setup.sh, and reconfigure)")
else()
  message(STATUS "jaccl data plane not built: ofi (disabled: -DJACCL_WITH_OFI=ON to build it)")
endif()
