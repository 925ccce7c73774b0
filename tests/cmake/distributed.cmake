# keel::distribute's tests under mpirun: the whole test_distributed suite with 2 and 3 workers,
# and the fault case (a worker that leaves) with 2; the [nccl] cases of test_cuda with 2 (one GPU
# each); test_parameter_server with 2 and 3 processes (one of them the server), and its fault
# case with 3; the distributed_mnist sample, synchronous with 2 workers and asynchronous with 2
# workers and a server. Open MPI leaks at exit, so the AddressSanitizer build runs these entries
# without leak checks. Skipped (77) only where keel has no MPI transport or mpirun is missing
# (the samples also where Debian's dataset-fashion-mnist is not installed, the NCCL entry on
# machines with fewer than two GPUs).
find_program(KEEL_MPIRUN NAMES mpirun mpiexec)
set(KEEL_MPI_TEST_ENV "KEEL_DEFAULT_DEVICE=cpu;ASAN_OPTIONS=detect_leaks=0;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
if(KEEL_MPIRUN AND KEEL_DISTRIBUTED_ENABLED AND TARGET test_distributed)
  set(KEEL_MPIRUN_ARGS --allow-run-as-root --oversubscribe --bind-to none)
  # keel_mpi_test(<name> <processes> <timeout s> <program> <arguments>...)
  function(keel_mpi_test name np timeout)
    add_test(NAME ${name} COMMAND ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS} -np ${np} ${ARGN})
    set_tests_properties(${name} PROPERTIES ENVIRONMENT "${KEEL_MPI_TEST_ENV}" TIMEOUT ${timeout}
                         SKIP_RETURN_CODE 77 LABELS distributed)
  endfunction()
  foreach(np 2 3)
    keel_mpi_test(distributed_mpirun_np${np} ${np} 120 $<TARGET_FILE:test_distributed> "[distributed]")
  endforeach()
  keel_mpi_test(distributed_mpirun_fault 2 60 $<TARGET_FILE:test_distributed> "[.fault]")
  if(TARGET test_parameter_server)
    foreach(np 2 3)
      keel_mpi_test(parameter_server_mpirun_np${np} ${np} 120 $<TARGET_FILE:test_parameter_server> "[parameter_server]")
    endforeach()
    keel_mpi_test(parameter_server_mpirun_fault 3 60 $<TARGET_FILE:test_parameter_server> "[.fault]")
  endif()
  # NCCL between two processes: a GPU each, so skipped (77) on machines with fewer than two.
  if(TARGET test_cuda AND KEEL_NCCL_ENABLED)
    set(two_gpus "test \"$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')\" -ge 2 || exit 77; exec \"$0\" \"$@\"")
    add_test(NAME distributed_nccl_mpirun_np2
             COMMAND sh -c "${two_gpus}" ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS} -np 2 $<TARGET_FILE:test_cuda> "[nccl]")
    set_tests_properties(distributed_nccl_mpirun_np2 PROPERTIES
                         ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0;OMP_NUM_THREADS=1" TIMEOUT 180
                         SKIP_RETURN_CODE 77 LABELS "distributed;cuda")
  endif()
  if(KEEL_BUILD_SAMPLES)
    # The sample on a 6000-image subset, one thread per process.
    set(mnist_sample sh -c "test -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz || exit 77; exec \"$0\" \"$@\""
        ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS})
    add_test(NAME distributed_mnist_sample_np2
             COMMAND ${mnist_sample} -np 2 $<TARGET_FILE:distributed_mnist> --limit 6000 --epochs 2)
    add_test(NAME distributed_mnist_sample_ps_np3
             COMMAND ${mnist_sample} -np 3 $<TARGET_FILE:distributed_mnist> --limit 6000 --epochs 2 --strategy ps)
    set_tests_properties(distributed_mnist_sample_np2 distributed_mnist_sample_ps_np3 PROPERTIES
                         ENVIRONMENT "${KEEL_MPI_TEST_ENV}" TIMEOUT 60 SKIP_RETURN_CODE 77 LABELS distributed)
  endif()
else()
  add_test(NAME "distributed_mpirun: skipped (no mpirun or keel built without MPI)" COMMAND sh -c "exit 77")
  set_tests_properties("distributed_mpirun: skipped (no mpirun or keel built without MPI)" PROPERTIES SKIP_RETURN_CODE 77)
endif()
