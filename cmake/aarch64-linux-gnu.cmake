# Cross-compiling k25 for 64-bit ARM Linux on a Debian x86-64 host (scripts/setup.sh installs the
# compiler, qemu-user and the arm64 libraries), as `make aarch64-test` does:
#   cmake -S . -B build-aarch64 -G Ninja -DCMAKE_BUILD_TYPE=Release \
#     -DCMAKE_TOOLCHAIN_FILE=cmake/aarch64-linux-gnu.cmake -DK25_BUILD_BENCH=OFF
# ctest then runs the test binaries under qemu-aarch64. ARM has the scalar kernel set only.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# The programs load Debian's arm64 multiarch libraries (libc6:arm64 and the rest, installed by
# scripts/setup.sh) from /: the loader of the cross toolchain's own glibc copy
# (/usr/aarch64-linux-gnu) with the multiarch libc hangs in pthread_create.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /)
# Debian's multiarch layout: arm64 libraries in /usr/lib/aarch64-linux-gnu, headers shared.
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu /usr)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig)
set(yaml-cpp_DIR ${CMAKE_CURRENT_LIST_DIR}/aarch64 CACHE PATH "yaml-cpp for the arm64 build" FORCE)
