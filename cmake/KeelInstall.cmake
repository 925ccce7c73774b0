# Installs keel with a CMake package config: find_package(keel CONFIG) + keel::keel.
include(CMakePackageConfigHelpers)
install(TARGETS keel EXPORT keelTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR}/include/keel DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT keelTargets NAMESPACE keel:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
configure_package_config_file(${CMAKE_CURRENT_SOURCE_DIR}/cmake/keelConfig.cmake.in
  ${CMAKE_CURRENT_BINARY_DIR}/keelConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/keelConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/keelConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/keelConfigVersion.cmake
              ${CMAKE_CURRENT_SOURCE_DIR}/cmake/KeelCudnn.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/keel)
