# cuDNN ships no CMake package: find its header and library beside the CUDA toolkit's and wrap
# them in the imported target keel_cudnn. Included by keel's build and by its package config.
find_path(KEEL_CUDNN_INCLUDE_DIR cudnn.h HINTS ${CUDAToolkit_INCLUDE_DIRS} /usr/include)
find_library(KEEL_CUDNN_LIBRARY cudnn HINTS ${CUDAToolkit_LIBRARY_DIR} /usr/lib/x86_64-linux-gnu)
if(KEEL_CUDNN_INCLUDE_DIR AND KEEL_CUDNN_LIBRARY AND NOT TARGET keel_cudnn)
  add_library(keel_cudnn INTERFACE IMPORTED GLOBAL)
  set_target_properties(keel_cudnn PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${KEEL_CUDNN_INCLUDE_DIR}"
                                              INTERFACE_LINK_LIBRARIES "${KEEL_CUDNN_LIBRARY}")
endif()
