#!/usr/bin/env bash
# Fails when the code breaks the layering of DESIGN (README, "Architecture"):
#   ops -> backend -> cpu / cuda kernels -> core
# * src/ops/ (and everything above it) reaches kernels only through src/backend/: it includes no
#   cpu/ or cuda/ header, and tests the device only to word an error (at most 3 is_cuda),
# * src/cpu/ and cuda/ include nothing of src/backend/, src/ops/ or the public op headers,
# * src/core/ holds data types: it includes nothing of backend/, cpu/, ops/ and of cuda/ only the
#   runtime (devices and memory),
# * no source file is longer than 700 lines.
#   scripts/check_layers.sh [root]
set -euo pipefail
root=${1:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$root"
status=0
fail() { echo "check_layers: $*"; status=1; }

above_backend=$(ls -d src/*/ | grep -vE '^src/(backend|cpu|core)/$' || true)
# shellcheck disable=SC2086
if out=$(grep -rnE '#include "(cpu|cuda)/' $above_backend 2>/dev/null); then
  fail "code above the backend includes kernel headers (use src/backend/):"; echo "$out"
fi
# shellcheck disable=SC2086
if out=$(grep -rnE '\b(cpu|cuda)::[a-z_]+' $above_backend 2>/dev/null | grep -vE ':\s*//'); then
  fail "code above the backend calls kernels directly (use src/backend/):"; echo "$out"
fi
count=$(cat src/ops/*.cpp | grep -c 'is_cuda' || true)
(( count <= 3 )) || fail "src/ops/ tests the device $count times (at most 3, for error messages)"
if out=$(grep -rnE '#include "(backend|ops)/|#include "keel/ops/' src/cpu cuda 2>/dev/null); then
  fail "kernels include the layers above them:"; echo "$out"
fi
if out=$(grep -rnE '#include "(backend|cpu|ops)/|#include "keel/ops/|#include "cuda/' src/core | grep -v '"cuda/runtime.hpp"'); then
  fail "src/core/ depends on the layers above it:"; echo "$out"
fi
while read -r n f; do
  [[ $f == total ]] && continue
  (( n <= 700 )) || fail "$f has $n lines (at most 700: split it by purpose)"
done < <(git ls-files -- 'src/*' 'include/*' 'cuda/*' 'tests/*' 'benchmarks/*' 'samples/*' |
         grep -E '\.(cpp|hpp|cu|cuh|h)$' | xargs wc -l)
(( status == 0 )) && echo "check_layers: the layering holds"
exit $status
