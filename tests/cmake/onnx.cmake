# io::export_onnx against independent readers: test_io_onnx's hidden case "[.onnx_cases]" writes
# ONNX models with keel's predictions for them (a CTest fixture), then ONNX Runtime (Node.js,
# tests/node/node_modules) runs them and onnx.checker (Debian's python3-onnx) validates them.
set(KEEL_ONNX_CASES ${CMAKE_CURRENT_BINARY_DIR}/onnx_cases)
add_test(NAME onnx_write_cases COMMAND test_io_onnx "[.onnx_cases]")
set_tests_properties(onnx_write_cases PROPERTIES FIXTURES_SETUP onnx_cases TIMEOUT 120
                     ENVIRONMENT "KEEL_ONNX_CASES=${KEEL_ONNX_CASES};KEEL_DEFAULT_DEVICE=cpu")

find_program(KEEL_TEST_NODE NAMES node nodejs)
if(KEEL_TEST_NODE AND EXISTS ${CMAKE_CURRENT_SOURCE_DIR}/node/node_modules/onnxruntime-node)
  add_test(NAME onnx_runtime_check COMMAND ${KEEL_TEST_NODE} ${CMAKE_CURRENT_SOURCE_DIR}/node/onnx_check.js ${KEEL_ONNX_CASES})
  set_tests_properties(onnx_runtime_check PROPERTIES FIXTURES_REQUIRED onnx_cases TIMEOUT 60)
else()
  add_test(NAME "onnx_runtime_check: skipped (node or onnxruntime-node missing)" COMMAND sh -c "exit 77")
  set_tests_properties("onnx_runtime_check: skipped (node or onnxruntime-node missing)" PROPERTIES SKIP_RETURN_CODE 77)
endif()

if(KEEL_TEST_PYTHON3)
  add_test(NAME onnx_python_check COMMAND ${KEEL_TEST_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/onnx_check.py ${KEEL_ONNX_CASES})
  set_tests_properties(onnx_python_check PROPERTIES FIXTURES_REQUIRED onnx_cases SKIP_RETURN_CODE 77 TIMEOUT 60)
endif()
