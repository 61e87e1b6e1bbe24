# Kernel sets: src/kernels/set/ is compiled once per instruction set, each time with its own
# -march flags and its own namespace (k25::isa_<set>), and the binary picks one at start from
# CPUID (src/kernels/dispatch.cpp; K25_ISA overrides). Everything else is compiled for the
# baseline, so one binary runs on any x86-64 with SSE4.2. On other processors (aarch64, built
# natively or with cmake/aarch64-linux-gnu.cmake) the scalar set is the only one, compiled for
# the architecture's baseline.
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(K25_X86 ON)
  set(K25_BASELINE_ARCH_FLAGS -march=x86-64-v2 -mtune=generic)
  set(K25_KERNEL_SET_FLAGS_avx2 -march=x86-64-v3 -mtune=generic)
  set(K25_KERNEL_SET_FLAGS_avxvnni -march=x86-64-v3 -mavxvnni -mtune=generic)
  set(K25_KERNEL_SET_FLAGS_avx512 -march=x86-64-v4 -mavx512vnni -mtune=generic)
  set(K25_KERNEL_SETS scalar avx2 avxvnni avx512)
else()
  set(K25_X86 OFF)
  set(K25_BASELINE_ARCH_FLAGS "")
  set(K25_KERNEL_SETS scalar)
endif()
set(K25_KERNEL_SET_FLAGS_scalar ${K25_BASELINE_ARCH_FLAGS})

# Position-independent code, so that the objects can go into libk25.so as well as into the
# executables. -fno-semantic-interposition keeps GCC inlining and calling our own functions
# directly, as it does without -fPIC (nothing in k25 is meant to be interposed).
function(k25_shared_library_ready target)
  set_target_properties(${target} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  target_compile_options(${target} PRIVATE -fno-semantic-interposition)
endfunction()

# Adds the sets' objects to `target`. GCC's -fno-weak makes the inline functions and template
# instances a set's files use local to each file: otherwise the linker would keep one copy of,
# say, std::vector<float>::resize from whichever set came first, and the baseline code would run
# AVX-512 instructions on a CPU without them.
function(k25_add_kernel_sets target)
  file(GLOB sources CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/src/kernels/set/*.cpp)
  foreach(set ${K25_KERNEL_SETS})
    add_library(k25kernels_${set} OBJECT ${sources})
    target_compile_options(k25kernels_${set} PRIVATE ${K25_KERNEL_SET_FLAGS_${set}})
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      target_compile_options(k25kernels_${set} PRIVATE -fno-weak)
    endif()
    target_compile_definitions(k25kernels_${set} PRIVATE K25_BUILDING_KERNEL_SET K25_KERNEL_SET=isa_${set}
                               K25_KERNEL_SET_NAME="${set}")
    target_include_directories(k25kernels_${set} PRIVATE ${CMAKE_SOURCE_DIR}/src)
    target_link_libraries(k25kernels_${set} PRIVATE Threads::Threads)
    k25_shared_library_ready(k25kernels_${set})
    target_sources(${target} PRIVATE $<TARGET_OBJECTS:k25kernels_${set}>)
  endforeach()
endfunction()

# Whether every flag of the list appears in /proc/cpuinfo's flags line (padded with spaces).
function(k25_cpu_has out flags)
  set(result ON)
  foreach(f ${ARGN})
    if(NOT flags MATCHES " ${f} ")
      set(result OFF)
    endif()
  endforeach()
  set(${out} ${result} PARENT_SCOPE)
endfunction()

# The sets this build machine runs (from /proc/cpuinfo), so that the tests can run the kernel
# tests on each of them.
function(k25_host_kernel_sets out)
  set(sets scalar)
  if(K25_X86 AND NOT CMAKE_CROSSCOMPILING AND EXISTS /proc/cpuinfo)
    file(STRINGS /proc/cpuinfo flags_line REGEX "^flags" LIMIT_COUNT 1)
    string(REGEX REPLACE "^flags[ \t]*:[ \t]*" " " flags " ${flags_line} ")
    k25_cpu_has(has_v3 "${flags}" avx2 fma f16c bmi2)
    k25_cpu_has(has_avxvnni "${flags}" avx_vnni)
    k25_cpu_has(has_v4 "${flags}" avx512f avx512bw avx512dq avx512vl avx512cd avx512_vnni)
    if(has_v3)
      list(APPEND sets avx2)
      if(has_avxvnni)
        list(APPEND sets avxvnni)
      endif()
      if(has_v4)
        list(APPEND sets avx512)
      endif()
    endif()
  endif()
  set(${out} ${sets} PARENT_SCOPE)
endfunction()
