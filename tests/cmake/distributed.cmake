# keel::distribute's tests under mpirun: the whole test_distributed suite with 2 and 3 workers,
# and the fault case (a worker that leaves) with 2. Open MPI leaks at exit, so the
# AddressSanitizer build runs these entries without leak checks. Skipped (77) only where keel
# has no MPI transport or mpirun is missing.
find_program(KEEL_MPIRUN NAMES mpirun mpiexec)
set(KEEL_MPI_TEST_ENV "KEEL_DEFAULT_DEVICE=cpu;ASAN_OPTIONS=detect_leaks=0;OMP_NUM_THREADS=1;OPENBLAS_NUM_THREADS=1")
if(KEEL_MPIRUN AND KEEL_DISTRIBUTED_ENABLED AND TARGET test_distributed)
  set(KEEL_MPIRUN_ARGS --allow-run-as-root --oversubscribe --bind-to none)
  foreach(np 2 3)
    add_test(NAME distributed_mpirun_np${np}
             COMMAND ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS} -np ${np} $<TARGET_FILE:test_distributed> "[distributed]")
    set_tests_properties(distributed_mpirun_np${np} PROPERTIES ENVIRONMENT "${KEEL_MPI_TEST_ENV}" TIMEOUT 120
                         SKIP_RETURN_CODE 77 LABELS distributed)
  endforeach()
  if(KEEL_BUILD_SAMPLES)
    # The sample on a 6000-image subset, 2 workers x 1 thread (skipped where Debian's
    # dataset-fashion-mnist is not installed).
    add_test(NAME distributed_mnist_sample_np2
             COMMAND sh -c "test -r /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz || exit 77; exec \"$0\" \"$@\""
                     ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS} -np 2 $<TARGET_FILE:distributed_mnist> --limit 6000 --epochs 2)
    set_tests_properties(distributed_mnist_sample_np2 PROPERTIES ENVIRONMENT "${KEEL_MPI_TEST_ENV}" TIMEOUT 60
                         SKIP_RETURN_CODE 77 LABELS distributed)
  endif()
  add_test(NAME distributed_mpirun_fault
           COMMAND ${KEEL_MPIRUN} ${KEEL_MPIRUN_ARGS} -np 2 $<TARGET_FILE:test_distributed> "[.fault]")
  set_tests_properties(distributed_mpirun_fault PROPERTIES ENVIRONMENT "${KEEL_MPI_TEST_ENV}" TIMEOUT 60
                       SKIP_RETURN_CODE 77 LABELS distributed)
else()
  add_test(NAME "distributed_mpirun: skipped (no mpirun or keel built without MPI)" COMMAND sh -c "exit 77")
  set_tests_properties("distributed_mpirun: skipped (no mpirun or keel built without MPI)" PROPERTIES SKIP_RETURN_CODE 77)
endif()
