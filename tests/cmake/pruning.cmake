# test_pruning reads the PruningSummaries event files back with the TensorBoard protos keel
# writes them with.
if(TARGET test_pruning)
  target_include_directories(test_pruning SYSTEM PRIVATE ${PROJECT_BINARY_DIR}/proto)
  target_link_libraries(test_pruning PRIVATE protobuf::libprotobuf)
endif()
