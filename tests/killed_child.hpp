#pragma once
// Ending a forked child with SIGKILL, for the tests that kill a save at a random moment.
//
// A child that runs OpenMP code under LLVM's runtime (the clang sanitizer build links libomp)
// registers itself in /dev/shm/__KMP_REGISTERED_LIB_<pid>_<uid> when the runtime starts. Killed,
// it cannot remove that file, and a later process that the kernel gives the same pid finds it,
// perhaps half written, and aborts at start-up ("OMP: Error #15: ... found unknown library
// already initialized"). So the parent removes the child's file once the child is reaped. Under
// GCC's libgomp there is no such file, and the unlink does nothing.
#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

namespace keel_test {

// Kills `pid` with SIGKILL, reaps it and returns its wait status.
inline int kill_and_reap(pid_t pid) {
  ::kill(pid, SIGKILL);
  int status = 0;
  ::waitpid(pid, &status, 0);
  const std::string registration =
      "/dev/shm/__KMP_REGISTERED_LIB_" + std::to_string(pid) + "_" + std::to_string(::getuid());
  ::unlink(registration.c_str());
  return status;
}

}  // namespace keel_test
