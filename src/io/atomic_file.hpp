#pragma once
// Temporary names for crash-safe writes, and the clean-up of those that dead processes left.
// Internal to keel: not a public header.
//
// Every writer of keel (io::atomic_write, Dataset.cache, Model::save's part folders) writes
// under "<path>.<kind>-<pid>-<hex>" beside its destination and renames into place. A process
// killed before the rename leaves that name behind; it never replaces the destination, but it
// takes disk space forever unless someone removes it. The embedded pid says whose it is: a
// temporary whose process is gone is garbage, one of a live process (another thread of ours, or
// another process saving the same path right now) must never be touched.
#include <sys/types.h>

#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace keel::io::detail {

// The kinds of temporaries keel makes: "tmp" (a file or folder being written), "parts" (the
// members of a .keel before they are zipped) and "old" (a previous model folder moved aside).
// "<path>.<kind>-<pid>-<random hex>", in the folder of path (so that rename is atomic).
std::string temp_name(const std::string& path, const char* kind);

// What a temporary's file name says about it.
struct TempName {
  std::string base;  // the destination's file name
  std::string kind;  // "tmp", "parts" or "old"
  pid_t pid = 0;     // the process that made it
};
// Parses "<base>.<kind>-<pid>-<hex>"; nullopt for any other name.
std::optional<TempName> parse_temp_name(std::string_view file_name);

// Whether process `pid` exists (kill(pid, 0) does not fail with ESRCH). Conservative: anything
// but a definite "no such process" counts as alive.
bool process_alive(pid_t pid);

// Removes the temporaries of dead processes beside `path` (files, or folders with what they hold).
// An "old" folder is removed only while `path` itself exists: until then it may be the only copy
// of the previous model. Best effort: what cannot be removed is left, and nothing throws.
// Returns how many entries were removed.
int remove_stale_temporaries(const std::string& path);

// The same for every temporary in `folder` whose destination file name satisfies `ours`
// (CheckpointManager: "<checkpoint_name>-<N>.safetensors").
int remove_stale_temporaries_in(const std::string& folder, const std::function<bool(const std::string&)>& ours);

}  // namespace keel::io::detail
