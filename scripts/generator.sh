# Sourced by run.sh, test.sh, consumer-check.sh and fuzz.sh: the CMake generator for a build tree.
# An existing tree keeps the generator it was made with (CMake refuses to switch); a new one uses
# Ninja when it is installed (setup.sh installs it), else Unix Makefiles.
#   cmake -S . -B build -G "$(keel_generator build)"
keel_generator() {
  local cached
  cached="$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$1/CMakeCache.txt" 2> /dev/null)"
  if [[ -n "$cached" ]]; then
    echo "$cached"
  elif command -v ninja > /dev/null 2>&1; then
    echo "Ninja"
  else
    echo "Unix Makefiles"
  fi
}
