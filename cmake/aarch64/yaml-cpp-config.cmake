# yaml-cpp for the aarch64 cross build. Debian's libyaml-cpp-dev cannot be installed for two
# architectures at once (installing the arm64 one removes the amd64 one), so the cross build uses
# the amd64 package's headers (the same version; they do not depend on the architecture) and the
# arm64 runtime library, libyaml-cpp0.7:arm64, which installs beside the amd64 one.
set(_k25_yaml_cpp_lib /usr/lib/aarch64-linux-gnu/libyaml-cpp.so.0.7)
if(NOT EXISTS ${_k25_yaml_cpp_lib})
  set(yaml-cpp_FOUND FALSE)
  set(yaml-cpp_NOT_FOUND_MESSAGE "${_k25_yaml_cpp_lib} is missing: run scripts/setup.sh")
  return()
endif()
if(NOT TARGET yaml-cpp)
  add_library(yaml-cpp SHARED IMPORTED)
  set_target_properties(yaml-cpp PROPERTIES IMPORTED_LOCATION ${_k25_yaml_cpp_lib}
                                            INTERFACE_INCLUDE_DIRECTORIES /usr/include)
endif()
set(yaml-cpp_FOUND TRUE)
