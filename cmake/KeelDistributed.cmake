# KeelDistributed: keel::distribute's transports. KEEL_DISTRIBUTED = AUTO (on when MPI's C
# interface is found), ON (MPI required) or OFF. With it on, keel links MPI privately and
# compiles its MPI transport (src/distribute/mpi_*.cpp with KEEL_HAVE_MPI=1); with it off, those
# files compile to the stubs that say keel was built without MPI.
set(KEEL_DISTRIBUTED AUTO CACHE STRING "Build keel::distribute's MPI transport: AUTO (when MPI is found), ON or OFF")
set_property(CACHE KEEL_DISTRIBUTED PROPERTY STRINGS AUTO ON OFF)

set(KEEL_DISTRIBUTED_ENABLED OFF)
if(NOT KEEL_DISTRIBUTED STREQUAL "OFF")
  if(KEEL_DISTRIBUTED STREQUAL "ON")
    find_package(MPI REQUIRED COMPONENTS C)
  else()
    find_package(MPI QUIET COMPONENTS C)
  endif()
  if(MPI_C_FOUND)
    set(KEEL_DISTRIBUTED_ENABLED ON)
  endif()
endif()

if(KEEL_DISTRIBUTED_ENABLED)
  # Linked privately; MPI's headers only for the one file that includes them (the others keep
  # their compile lines, and so their compiler-cache entries, as without MPI).
  target_link_libraries(keel PRIVATE $<LINK_ONLY:MPI::MPI_C>)
  set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/src/distribute/mpi_communicator.cpp PROPERTIES
                              COMPILE_DEFINITIONS KEEL_HAVE_MPI=1
                              INCLUDE_DIRECTORIES "${MPI_C_INCLUDE_DIRS}")
  message(STATUS "keel: distributed training over MPI ${MPI_C_VERSION}")
else()
  message(STATUS "keel: distributed training without MPI (one worker per job)")
endif()

# NCCL, the transport of GPU buffers (cuda/nccl.cu, src/distribute/nccl_communicator.cpp): with
# the CUDA backend and MPI (which starts the ranks and hands out NCCL's id), compiled against
# the toolkit's nccl.h; libnccl itself is opened on first use, not linked (it is 200 MB).
set(KEEL_NCCL_ENABLED OFF)
if(KEEL_CUDA_ENABLED AND KEEL_DISTRIBUTED_ENABLED)
  find_path(KEEL_NCCL_INCLUDE_DIR nccl.h HINTS ${CUDAToolkit_INCLUDE_DIRS})
  find_library(KEEL_NCCL_LIBRARY NAMES nccl HINTS ${CUDAToolkit_LIBRARY_DIR})
  if(KEEL_NCCL_INCLUDE_DIR AND KEEL_NCCL_LIBRARY)
    set(KEEL_NCCL_ENABLED ON)
    set_source_files_properties(${CMAKE_CURRENT_SOURCE_DIR}/cuda/nccl.cu PROPERTIES
                                COMPILE_DEFINITIONS "KEEL_HAVE_NCCL=1;KEEL_NCCL_LIBRARY=\"${KEEL_NCCL_LIBRARY}\""
                                INCLUDE_DIRECTORIES "${KEEL_NCCL_INCLUDE_DIR}")
    message(STATUS "keel: NCCL transport for GPU buffers (${KEEL_NCCL_LIBRARY}, opened at run time)")
  endif()
endif()

# benchmarks/bench_distributed.cpp calls MPI_Allreduce directly (its baseline) and keel's internal
# gradient all-reduce: an interface library that benchmarks/CMakeLists.txt links through
# KEEL_BENCH_LIBS_bench_distributed.
add_library(keel_bench_mpi INTERFACE)
target_include_directories(keel_bench_mpi INTERFACE ${CMAKE_CURRENT_SOURCE_DIR}/src)
if(KEEL_DISTRIBUTED_ENABLED)
  target_link_libraries(keel_bench_mpi INTERFACE MPI::MPI_C)
  target_compile_definitions(keel_bench_mpi INTERFACE KEEL_BENCH_MPI=1)
endif()
set(KEEL_BENCH_LIBS_bench_distributed keel_bench_mpi)
