# PyTorch interchange (io::load_pytorch / save_pytorch, Model::pytorch_state_dict): PyTorch itself
# as the oracle. tests/python/pytorch_oracle.py has torch write state_dicts and model outputs, runs
# the hidden [.pytorch_oracle] cases of test_io_pytorch_oracle on them, and reads keel's files back
# with torch.load(weights_only=True). Exit 77 (skipped) only where python3-torch is missing.
if(KEEL_TEST_PYTHON3)
  add_test(NAME pytorch_oracle_python_check
           COMMAND ${KEEL_TEST_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/pytorch_oracle.py
                   $<TARGET_FILE:test_io_pytorch_oracle>)
  set_tests_properties(pytorch_oracle_python_check PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 120)
else()
  add_test(NAME "pytorch_oracle_python_check: skipped (python3 not installed)" COMMAND sh -c "exit 77")
  set_tests_properties("pytorch_oracle_python_check: skipped (python3 not installed)" PROPERTIES SKIP_RETURN_CODE 77)
endif()

# The sample: torch's SimpleCNN weights (samples/data/simple_cnn.pt) predict in keel what they
# predict in torch; it exits 1 on a mismatch.
if(KEEL_BUILD_SAMPLES)
  add_test(NAME pytorch_to_keel_sample COMMAND pytorch_to_keel ${PROJECT_SOURCE_DIR}/samples/data)
  set_tests_properties(pytorch_to_keel_sample PROPERTIES TIMEOUT 60 ENVIRONMENT "KEEL_DEFAULT_DEVICE=cpu")
endif()
