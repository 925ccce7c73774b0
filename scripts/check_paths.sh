#!/usr/bin/env bash
# Fails when a source file or document of the project names a project file that does not exist
# (a comment pointing at a file since renamed or split, a README path gone stale).
#
# A name counts when it starts with a top-level folder (src/, cuda/, include/, tests/, scripts/,
# samples/, benchmarks/, cmake/) or with a folder of src/ (core/, cpu/, ops/, backend/, ...),
# and ends in a source or script extension. It must exist relative to the root, src/,
# include/, include/keel/, src/cpu/ or tests/ (the folders the project's includes and comments are relative to).
#   scripts/check_paths.sh [root]    (default: the repository this script is in)
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"

top='src|cuda|include|tests|scripts|samples|benchmarks|cmake|\.ci'
sub='core|cpu|simd|ops|backend|autograd|layers|models|io|data|train|optimizers|losses|metrics|callbacks|mixed_precision|keel'
ext='cpp|hpp|cu|cuh|h|cmake|sh|py|txt'

if git rev-parse --is-inside-work-tree > /dev/null 2>&1; then
  mapfile -t files < <(git ls-files -- '*.cpp' '*.hpp' '*.cu' '*.cuh' '*.h' '*.cmake' 'CMakeLists.txt' '*.sh' '*.md' '.ci/*')
else
  mapfile -t files < <(find . -type f \( -name '*.cpp' -o -name '*.hpp' -o -name '*.cu' -o -name '*.cuh' \
    -o -name '*.h' -o -name '*.cmake' -o -name CMakeLists.txt -o -name '*.sh' -o -name '*.md' \) \
    -not -path './build*' -not -path './.ccache/*' | sed 's|^\./||')
fi

missing=0
declare -A exists
while IFS=: read -r f line name; do
  name=${name%.}
  # A glob or a placeholder (test_<area>.cpp, *.cu) names a family, not one file.
  [[ $name == *'*'* || $name == *'<'* ]] && continue
  if [[ -z ${exists[$name]:-} ]]; then
    exists[$name]=no
    for base in . src include include/keel src/cpu tests; do
      if [[ -e $base/$name ]]; then exists[$name]=yes; break; fi
    done
  fi
  if [[ ${exists[$name]} == no ]]; then
    echo "$f:$line: names $name, which does not exist"
    missing=1
  fi
done < <(grep -onE "(^|[^A-Za-z0-9_./-])($top|$sub)/[A-Za-z0-9_./-]*\.($ext)([^A-Za-z0-9_]|$)" "${files[@]}" |
         sed -E 's/^([^:]*):([0-9]+):[^A-Za-z0-9_.]?/\1:\2:/; s/[^A-Za-z0-9_]$//')

if (( missing )); then
  echo "check_paths: the names above point at no file of the project; fix or remove them" >&2
  exit 1
fi
echo "check_paths: every project path named in ${#files[@]} files exists"
