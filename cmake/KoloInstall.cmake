# What `cmake --install <build> --prefix P` puts under P (README "Installing and consuming the
# package"):
#   include/kolo/*.h                       the public headers, version.h included
#   lib/libkolo.so.X.Y.Z (+ .so.X, .so)    kolo_shared; gRPC, protobuf and spdlog linked privately
#   bin/kolorun, kolo-bench, kolo-timeline
#   lib/cmake/kolo/koloConfig.cmake, koloConfigVersion.cmake, koloTargets.cmake (kolo::kolo)
#   lib/pkgconfig/kolo.pc
include(CMakePackageConfigHelpers)

set(KOLO_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/kolo)
set(KOLO_PKGCONFIG_DIR ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# One include/kolo: the runtime's API (runtime/include) and the types it shares with kolo's
# insides (core/include).
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/kolo ${PROJECT_SOURCE_DIR}/core/include/kolo
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
        FILES_MATCHING PATTERN "*.h")
install(FILES ${PROJECT_BINARY_DIR}/core/include/kolo/version.h
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kolo)

install(TARGETS kolo_shared EXPORT koloTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# The tools link kolo's static libraries: they need no libkolo.so at run time.
install(TARGETS kolorun kolo-bench kolo-timeline RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

install(EXPORT koloTargets NAMESPACE kolo:: DESTINATION ${KOLO_CMAKE_DIR})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/koloConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/koloConfig.cmake
                              INSTALL_DESTINATION ${KOLO_CMAKE_DIR})
# 0.x: a new minor version may change the API, so find_package(kolo 0.1) accepts 0.1.* only.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/koloConfig.cmake ${PROJECT_BINARY_DIR}/koloConfigVersion.cmake
        DESTINATION ${KOLO_CMAKE_DIR})

# kolo.pc finds its prefix from its own location, so the package can be moved after install.
file(RELATIVE_PATH KOLO_PC_PREFIX_FROM_PCDIR /prefix/${KOLO_PKGCONFIG_DIR} /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/kolo.pc.in ${PROJECT_BINARY_DIR}/kolo.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/kolo.pc DESTINATION ${KOLO_PKGCONFIG_DIR})

# The pip build's wheel: its own component, left out of a plain `cmake --install`.
include(${CMAKE_CURRENT_LIST_DIR}/KoloWheel.cmake)
