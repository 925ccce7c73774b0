# Keras files (.keras, .h5, .weights.h5): test_io_keras (globbed) reads the HDF5 files back
# through keel's own wrapper (src/io/hdf5_file.hpp; HDF5 comes with keel's link interface), and
# keras_files_python_check is an
# independent reader and writer (h5py + numpy, tests/python/keras_files_check.py) driving
# keras_files_tool. It exits 77 (skipped) only where h5py or numpy is missing.
add_executable(keras_files_tool ${CMAKE_CURRENT_LIST_DIR}/../tools/keras_files_tool.cpp)
target_link_libraries(keras_files_tool PRIVATE keel::keel)
if(KEEL_TEST_PYTHON3)
  add_test(NAME keras_files_python_check
           COMMAND ${KEEL_TEST_PYTHON3} ${CMAKE_CURRENT_LIST_DIR}/../python/keras_files_check.py
                   $<TARGET_FILE:keras_files_tool>)
  set_tests_properties(keras_files_python_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "KEEL_DEFAULT_DEVICE=cpu")
else()
  add_test(NAME "keras_files_python_check: skipped (python3 not installed)" COMMAND sh -c "exit 77")
  set_tests_properties("keras_files_python_check: skipped (python3 not installed)" PROPERTIES SKIP_RETURN_CODE 77)
endif()
