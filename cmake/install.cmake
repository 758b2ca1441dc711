# `cmake --install`: libsluice.so (SONAME libsluice.so.0), libsluice.a (every
# static library the C API needs, merged into one archive), the header,
# sluice.pc, the CMake package (find_package(sluice): sluice::sluice, the
# shared library, and sluice::sluice_static) and the `sluice` command.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# The static archive: libsluice.a alone holds only src/api; a user of the
# installed one must not need our internal library layout, so the archives
# are merged with an ar MRI script.
set(_sluice_parts sluice sluice_model sluice_format sluice_common sluice_quant sluice_runtime sluice_vision sluice_tokenizer
    sluice_sample sluice_grammar sluice_synth sluice_convert)
set(_mri "CREATE ${CMAKE_BINARY_DIR}/libsluice-bundle.a\n")
foreach(t ${_sluice_parts})
  string(APPEND _mri "ADDLIB $<TARGET_FILE:${t}>\n")
endforeach()
string(APPEND _mri "SAVE\nEND\n")
file(GENERATE OUTPUT ${CMAKE_BINARY_DIR}/libsluice-bundle.mri CONTENT "${_mri}")
add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/libsluice-bundle.a
  COMMAND ${CMAKE_COMMAND} -E rm -f ${CMAKE_BINARY_DIR}/libsluice-bundle.a
  COMMAND ${CMAKE_AR} -M < ${CMAKE_BINARY_DIR}/libsluice-bundle.mri
  DEPENDS ${_sluice_parts} ${CMAKE_BINARY_DIR}/libsluice-bundle.mri
  COMMENT "Merging the static libraries into libsluice.a" VERBATIM)
add_custom_target(sluice_bundle ALL DEPENDS ${CMAKE_BINARY_DIR}/libsluice-bundle.a)

# What a static link needs besides the archive (the shared library records
# its own dependencies).
set(SLUICE_STATIC_LIBS "-lcrypto -lz -lutf8proc")
if(URING_LIB)
  string(APPEND SLUICE_STATIC_LIBS " -luring")
endif()
string(APPEND SLUICE_STATIC_LIBS " -lpthread -lstdc++ -lm")
string(REPLACE "-l" "" _sluice_static_names "${SLUICE_STATIC_LIBS}")
separate_arguments(SLUICE_STATIC_LIB_NAMES UNIX_COMMAND "${_sluice_static_names}")

install(TARGETS sluice_shared LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES ${CMAKE_BINARY_DIR}/libsluice-bundle.a DESTINATION ${CMAKE_INSTALL_LIBDIR} RENAME libsluice.a)
install(FILES ${CMAKE_SOURCE_DIR}/include/sluice/sluice.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/sluice)
install(TARGETS sluice_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(FILES ${CMAKE_SOURCE_DIR}/python/sluice.py DESTINATION ${CMAKE_INSTALL_DATADIR}/sluice/python)

# Relocatable: the prefix is found from the .pc file's own place, so
# `cmake --install --prefix ANYWHERE` gives a working sluice.pc.
file(RELATIVE_PATH SLUICE_PC_TO_PREFIX "${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig" "${CMAKE_INSTALL_PREFIX}")
string(REGEX REPLACE "/$" "" SLUICE_PC_TO_PREFIX "${SLUICE_PC_TO_PREFIX}")
configure_file(${CMAKE_SOURCE_DIR}/cmake/sluice.pc.in ${CMAKE_BINARY_DIR}/sluice.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sluice.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/sluiceConfig.cmake.in ${CMAKE_BINARY_DIR}/sluiceConfig.cmake
  INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice PATH_VARS CMAKE_INSTALL_INCLUDEDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sluiceConfigVersion.cmake COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sluiceConfig.cmake ${CMAKE_BINARY_DIR}/sluiceConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/sluice)
