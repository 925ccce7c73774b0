# keel-serve (serve/): the unit tests of its pieces link keel_serve_lib; an end-to-end check
# runs the real server with Python's urllib as the client (tests/python/serve_check.py).
if(KEEL_BUILD_SERVE)
  # serve/ is added after tests/: the targets resolve when the build is generated.
  target_link_libraries(test_serve PRIVATE keel_serve_lib)
  find_program(KEEL_SERVE_PYTHON3 NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
  if(NOT KEEL_SERVE_PYTHON3)
    find_program(KEEL_SERVE_PYTHON3 NAMES python3)
  endif()
  if(KEEL_SERVE_PYTHON3)
    add_test(NAME serve_rest_api_check
             COMMAND ${KEEL_SERVE_PYTHON3} ${CMAKE_CURRENT_SOURCE_DIR}/python/serve_check.py
                     $<TARGET_FILE:keel-serve> $<TARGET_FILE:save_demo_model>)
    set_tests_properties(serve_rest_api_check PROPERTIES TIMEOUT 60 LABELS serve)
  else()
    add_test(NAME "serve_rest_api_check: skipped (python3 not installed)" COMMAND sh -c "exit 77")
    set_tests_properties("serve_rest_api_check: skipped (python3 not installed)" PROPERTIES SKIP_RETURN_CODE 77)
  endif()
else()
  # Without the server's build the unit tests compile its conversion, batching, config and
  # metrics sources themselves (none of them needs HTTP).
  find_package(nlohmann_json 3.11 REQUIRED)
  target_sources(test_serve PRIVATE
    ${PROJECT_SOURCE_DIR}/serve/batcher.cpp ${PROJECT_SOURCE_DIR}/serve/flags.cpp
    ${PROJECT_SOURCE_DIR}/serve/metrics.cpp ${PROJECT_SOURCE_DIR}/serve/model_config.cpp
    ${PROJECT_SOURCE_DIR}/serve/signature.cpp ${PROJECT_SOURCE_DIR}/serve/tensor_json.cpp)
  target_include_directories(test_serve PRIVATE ${PROJECT_SOURCE_DIR}/serve)
  target_link_libraries(test_serve PRIVATE nlohmann_json::nlohmann_json)
endif()
