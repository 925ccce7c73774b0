# Finds keel's build dependencies (all Debian packages; see scripts/setup.sh).
include(GNUInstallDirs)
find_package(fmt 9 REQUIRED)
find_package(xsimd 8 REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS CXX)
find_package(ZLIB REQUIRED)  # gzip IDX files and .npz archives (src/data/)
# TensorBoard's event protos (third_party/tensorboard) compiled with protoc into keel; protobuf's
# headers stay out of keel's public headers.
find_package(Protobuf REQUIRED)
# PNG and JPEG codecs (libpng, libjpeg-turbo) for data::decode_png / decode_jpeg; their headers
# stay out of keel's public headers too.
find_package(PNG REQUIRED)
find_package(JPEG REQUIRED)

# oneDNN (Debian's libdnnl-dev) supplies keel's float32 GEMM where it is found: its JIT kernels
# pick AVX-512 or AVX2 from the processor's feature bits, where OpenBLAS 0.3.21 picks its kernels
# by CPU model and falls back to SSE3 ("Prescott") on models newer than itself (measured on a
# Xeon model 207: 25 GFLOP/s against oneDNN's 125-160 on one core). Built with the OpenMP
# runtime, it shares keel's one thread pool. KEEL_ONEDNN=OFF keeps OpenBLAS for every GEMM.
set(KEEL_ONEDNN AUTO CACHE STRING "Use oneDNN's sgemm: AUTO (when found), ON or OFF")
set_property(CACHE KEEL_ONEDNN PROPERTY STRINGS AUTO ON OFF)
set(KEEL_ONEDNN_ENABLED OFF)
if(NOT KEEL_ONEDNN STREQUAL "OFF")
  # Found by hand: Debian's dnnl-config.cmake also requires OpenCL (its GPU runtime), which
  # keel does not use.
  find_path(KEEL_DNNL_INCLUDE_DIR oneapi/dnnl/dnnl.h)
  find_library(KEEL_DNNL_LIBRARY NAMES dnnl)
  if(KEEL_DNNL_INCLUDE_DIR AND KEEL_DNNL_LIBRARY)
    set(KEEL_ONEDNN_ENABLED ON)
    add_library(keel_dnnl INTERFACE IMPORTED GLOBAL)  # seen by projects that add keel as a subdirectory
    target_include_directories(keel_dnnl INTERFACE ${KEEL_DNNL_INCLUDE_DIR})
    target_link_libraries(keel_dnnl INTERFACE ${KEEL_DNNL_LIBRARY})
    message(STATUS "keel: oneDNN (${KEEL_DNNL_LIBRARY}) for float32 GEMM")
  elseif(KEEL_ONEDNN STREQUAL "ON")
    message(FATAL_ERROR "KEEL_ONEDNN=ON but oneDNN was not found (apt-get install libdnnl-dev)")
  endif()
endif()
