#pragma once
// keel-serve's log: one timestamped line per event on stderr, whole lines even from several threads.
#include <string>

namespace keel::serve {
void log_line(const std::string& message);
}
