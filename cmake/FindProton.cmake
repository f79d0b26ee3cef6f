# FindProton.cmake — locate Debian's Qpid Proton 0.37 (C core + proactor + C++ API).
#
# Debian ships no CMake config for Proton, and libqpid-proton-cpp.pc requires
# libqpid-proton-core.pc / libqpid-proton-proactor.pc, which no package ships,
# so pkg-config fails. We find headers and libraries directly.
#
# Imported targets:
#   Proton::core      libqpid-proton-core      (engine, codec)
#   Proton::proactor  libqpid-proton-proactor  (I/O; links core)
#   Proton::cpp       libqpid-proton-cpp       (C++ API; links core and proactor)
# Variables: Proton_FOUND, Proton_INCLUDE_DIR, Proton_VERSION

find_path(Proton_INCLUDE_DIR NAMES proton/version.h proton/connection.hpp)
find_library(Proton_CORE_LIBRARY NAMES qpid-proton-core libqpid-proton-core.so.10)
find_library(Proton_PROACTOR_LIBRARY NAMES qpid-proton-proactor libqpid-proton-proactor.so.1)
find_library(Proton_CPP_LIBRARY NAMES qpid-proton-cpp)

if(Proton_INCLUDE_DIR AND EXISTS "${Proton_INCLUDE_DIR}/proton/version.h")
  file(STRINGS "${Proton_INCLUDE_DIR}/proton/version.h" _pv REGEX "#define PN_VERSION_(MAJOR|MINOR|POINT)")
  string(REGEX REPLACE ".*PN_VERSION_MAJOR ([0-9]+).*" "\\1" _maj "${_pv}")
  string(REGEX REPLACE ".*PN_VERSION_MINOR ([0-9]+).*" "\\1" _min "${_pv}")
  string(REGEX REPLACE ".*PN_VERSION_POINT ([0-9]+).*" "\\1" _pt "${_pv}")
  set(Proton_VERSION "${_maj}.${_min}.${_pt}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Proton
  REQUIRED_VARS Proton_INCLUDE_DIR Proton_CORE_LIBRARY Proton_PROACTOR_LIBRARY Proton_CPP_LIBRARY
  VERSION_VAR Proton_VERSION)

if(Proton_FOUND)
  foreach(_part CORE PROACTOR CPP)
    string(TOLOWER ${_part} _name)
    if(NOT TARGET Proton::${_name})
      add_library(Proton::${_name} SHARED IMPORTED)
      set_target_properties(Proton::${_name} PROPERTIES
        IMPORTED_LOCATION "${Proton_${_part}_LIBRARY}"
        INTERFACE_INCLUDE_DIRECTORIES "${Proton_INCLUDE_DIR}")
    endif()
  endforeach()
  set_property(TARGET Proton::proactor APPEND PROPERTY INTERFACE_LINK_LIBRARIES Proton::core)
  set_property(TARGET Proton::cpp APPEND PROPERTY INTERFACE_LINK_LIBRARIES Proton::core Proton::proactor)
endif()
mark_as_advanced(Proton_INCLUDE_DIR Proton_CORE_LIBRARY Proton_PROACTOR_LIBRARY Proton_CPP_LIBRARY)
