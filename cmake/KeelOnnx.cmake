# KeelOnnx: the ONNX model schema (third_party/onnx), generated with protoc into the build tree
# and compiled into keel for io::export_onnx (src/io/onnx_*.cpp), as the TensorBoard protos are.
# protoc runs with the import root as its only -I, so the output lands at proto/onnx/onnx.pb.{h,cc}.
set(KEEL_ONNX_PROTO_ROOT ${CMAKE_CURRENT_SOURCE_DIR}/third_party/onnx)
set(KEEL_ONNX_PROTO ${KEEL_ONNX_PROTO_ROOT}/onnx/onnx.proto)
set(KEEL_ONNX_PROTO_OUT ${CMAKE_CURRENT_BINARY_DIR}/proto)
add_custom_command(OUTPUT ${KEEL_ONNX_PROTO_OUT}/onnx/onnx.pb.cc ${KEEL_ONNX_PROTO_OUT}/onnx/onnx.pb.h
                   COMMAND ${CMAKE_COMMAND} -E make_directory ${KEEL_ONNX_PROTO_OUT}
                   COMMAND protobuf::protoc -I ${KEEL_ONNX_PROTO_ROOT} --cpp_out=${KEEL_ONNX_PROTO_OUT} ${KEEL_ONNX_PROTO}
                   DEPENDS ${KEEL_ONNX_PROTO} protobuf::protoc
                   COMMENT "protoc onnx.proto" VERBATIM)
target_sources(keel PRIVATE ${KEEL_ONNX_PROTO_OUT}/onnx/onnx.pb.cc)
set_source_files_properties(${KEEL_ONNX_PROTO_OUT}/onnx/onnx.pb.cc PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
target_include_directories(keel SYSTEM PRIVATE ${KEEL_ONNX_PROTO_OUT})
target_link_libraries(keel PRIVATE protobuf::libprotobuf)
