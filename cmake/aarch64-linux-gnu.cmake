# Cross build for 64-bit ARM Linux with Debian's g++-aarch64-linux-gnu; the
# tests run under qemu-aarch64 (Debian's qemu-user) as the emulator.
# scripts/test-arm64.sh prepares SLUICE_ARM64_DEPS: Debian's arm64 -dev
# packages unpacked into a folder (headers, libraries, CMake configs), so the
# host's package state is left alone (no `dpkg --add-architecture`).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)

list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES SLUICE_ARM64_DEPS)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu ${SLUICE_ARM64_DEPS})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Multiarch subfolders (lib/aarch64-linux-gnu) of the unpacked packages.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
if(SLUICE_ARM64_DEPS)
  # The linker resolves the unpacked libraries' own dependencies here, and
  # arch-specific headers (openssl/opensslconf.h) live in the multiarch
  # include folder that no Find module names.
  set(CMAKE_EXE_LINKER_FLAGS_INIT "-Wl,-rpath-link,${SLUICE_ARM64_DEPS}/usr/lib/aarch64-linux-gnu")
  set(CMAKE_C_FLAGS_INIT "-isystem ${SLUICE_ARM64_DEPS}/usr/include/aarch64-linux-gnu")
  set(CMAKE_CXX_FLAGS_INIT "-isystem ${SLUICE_ARM64_DEPS}/usr/include/aarch64-linux-gnu")
endif()

# -L: the ARM dynamic loader and libc; the build tree's RPATH finds the
# unpacked libraries. gtest_discover_tests and CTest both go through this.
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L /usr/aarch64-linux-gnu)
