# What `cmake --install build --prefix P` adds beside the targets the folders install themselves
# (bin/attnlab, lib/libattnlab_core.so, lib/attnlab/{plugins,datasets}/*.so): the plugin SDK's
# headers, the experiment files and the papers' published numbers (conf/papers), the CMake package
# a plugin author's find_package(attnlab) reads, and CPack's Debian package (`cpack -G DEB` in the
# build folder).
include(CMakePackageConfigHelpers)

# The SDK: only what a plugin sees (the contract, parameters, the attention and dataset
# interfaces, and the helpers we want authors to reuse). The host's headers (model, trainer,
# config, data loader, variance, instability) stay in the source tree.
set(ATTNLAB_SDK_HEADERS plugin.hpp params.hpp attention.hpp dataset.hpp dataset_plugin.hpp linalg.hpp data_util.hpp token_cache.hpp
                        seed_stream.hpp torch_compat.hpp precision.hpp step_ops.hpp)
list(TRANSFORM ATTNLAB_SDK_HEADERS PREPEND ${PROJECT_SOURCE_DIR}/core/include/attnlab/)
install(FILES ${ATTNLAB_SDK_HEADERS} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/attnlab COMPONENT sdk)

file(GLOB ATTNLAB_CONF_FILES ${PROJECT_SOURCE_DIR}/conf/*.toml)
install(FILES ${ATTNLAB_CONF_FILES} DESTINATION ${CMAKE_INSTALL_DATADIR}/attnlab/conf COMPONENT runtime)
# the papers' published numbers, where `attnlab table --paper NAME` looks (runner/build_info.hpp.in)
file(GLOB ATTNLAB_PAPER_FILES ${PROJECT_SOURCE_DIR}/conf/papers/*.toml)
install(FILES ${ATTNLAB_PAPER_FILES} DESTINATION ${CMAKE_INSTALL_DATADIR}/attnlab/conf/papers COMPONENT runtime)

set(ATTNLAB_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/attnlab)
install(EXPORT attnlabTargets NAMESPACE attnlab:: DESTINATION ${ATTNLAB_CMAKE_DIR} COMPONENT sdk)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/attnlabConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/attnlabConfig.cmake INSTALL_DESTINATION ${ATTNLAB_CMAKE_DIR})
# 0.x: a minor version may change the plugin contract, so 0.2 accepts 0.2.* only
write_basic_package_version_file(${PROJECT_BINARY_DIR}/attnlabConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/attnlabConfig.cmake ${PROJECT_BINARY_DIR}/attnlabConfigVersion.cmake
              ${PROJECT_SOURCE_DIR}/cmake/attnlabPluginFunctions.cmake
        DESTINATION ${ATTNLAB_CMAKE_DIR} COMPONENT sdk)

# Debian package, of a build against Debian's LibTorch only (a package cannot depend on a PyPI
# wheel's files): `cpack -G DEB` in the build folder writes attnlab_VERSION_ARCH.deb. Depends:
# the shared libraries the binaries link (dpkg-shlibdeps finds LibTorch, Boost, SQLite, Nettle,
# libpng, ...), plus OpenBLAS, which LibTorch reaches through the BLAS alternative and no ELF
# names. Building plugins against the SDK needs the compilers and the -dev packages: Recommends.
if(ATTNLAB_PYTORCH_LIBTORCH)
  return()
endif()
set(CPACK_PACKAGE_NAME attnlab)
set(CPACK_PACKAGE_VENDOR attnlab)
set(CPACK_PACKAGE_CONTACT "attnlab maintainers <maintainers@attnlab.invalid>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "experiments comparing attention methods on long sequences (LibTorch)")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "libopenblas0-openmp | libopenblas0")
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libtorch-dev, libboost-dev, cmake, g++, gnuplot-nox")
set(CPACK_DEB_COMPONENT_INSTALL OFF)
include(CPack)
