# KeelHdf5: the HDF5 C library, for Keras' .keras (its model.weights.h5 member), legacy .h5 and
# .weights.h5 files (src/io/hdf5_file.cpp). Only the C API is used, and only from src/: keel's
# public headers never include HDF5's, so it is linked PRIVATE (a static keel's consumers link it
# through keelConfig.cmake's find_dependency(HDF5 COMPONENTS C)).
# FindHDF5 probes the C compiler (try_compile of a .c file) even where it finds the library
# without it, so C must be enabled; keel compiles no C itself.
get_property(_keel_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(NOT "C" IN_LIST _keel_languages)
  enable_language(C)
endif()
unset(_keel_languages)
find_package(HDF5 REQUIRED COMPONENTS C)
if(TARGET hdf5::hdf5)
  target_link_libraries(keel PRIVATE hdf5::hdf5)
else()
  # FindHDF5 of an older CMake: variables only.
  target_include_directories(keel SYSTEM PRIVATE ${HDF5_C_INCLUDE_DIRS} ${HDF5_INCLUDE_DIRS})
  target_compile_definitions(keel PRIVATE ${HDF5_C_DEFINITIONS} ${HDF5_DEFINITIONS})
  target_link_libraries(keel PRIVATE ${HDF5_C_LIBRARIES})
endif()
