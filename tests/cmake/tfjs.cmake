# The TensorFlow.js Layers format against TensorFlow.js itself (@tensorflow/tfjs 4.22, pure
# JavaScript, from tests/node/node_modules, installed by scripts/setup.sh). One CTest entry runs
#   1. tfjs_layers_oracle.js make: tfjs builds models with fixed weights, saves them and its
#      predictions on a fixed input,
#   2. test_io_tfjs [tfjs_oracle]: keel loads them and must predict the same (1e-5), then saves its
#      own models (float32, uint8 and uint16 weights, several shards) with its predictions,
#   3. tfjs_layers_oracle.js check: tf.loadLayersModel reads keel's and must predict what keel did.
# Skipped (77) only where node or the npm package is missing.
find_program(KEEL_NODE NAMES node nodejs)
set(KEEL_TFJS_PACKAGE ${CMAKE_CURRENT_SOURCE_DIR}/node/node_modules/@tensorflow/tfjs/package.json)
if(KEEL_NODE AND EXISTS ${KEEL_TFJS_PACKAGE})
  set(KEEL_TFJS_WORK ${CMAKE_CURRENT_BINARY_DIR}/tfjs_oracle)
  set(KEEL_TFJS_SCRIPT ${CMAKE_CURRENT_SOURCE_DIR}/node/tfjs_layers_oracle.js)
  add_test(NAME tfjs_layers_oracle
           COMMAND sh -c "rm -rf '${KEEL_TFJS_WORK}' && '${KEEL_NODE}' '${KEEL_TFJS_SCRIPT}' make '${KEEL_TFJS_WORK}' && KEEL_TFJS_DIR='${KEEL_TFJS_WORK}' '$<TARGET_FILE:test_io_tfjs>' '[tfjs_oracle]' && '${KEEL_NODE}' '${KEEL_TFJS_SCRIPT}' check '${KEEL_TFJS_WORK}'")
  set_tests_properties(tfjs_layers_oracle PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120
                       ENVIRONMENT "KEEL_DEFAULT_DEVICE=cpu")
else()
  add_test(NAME "tfjs_layers_oracle: skipped (node or @tensorflow/tfjs not installed)" COMMAND sh -c "exit 77")
  set_tests_properties("tfjs_layers_oracle: skipped (node or @tensorflow/tfjs not installed)"
                       PROPERTIES SKIP_RETURN_CODE 77)
endif()
