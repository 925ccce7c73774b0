#!/usr/bin/env bash
# The main job: install the build dependencies, build keel (Release) and its sample programs into
# build/, and run the samples:
#   linear_regression   TensorFlow's "basic training loops" tutorial (GradientTape by hand)
#   custom_layer        a subclassed Keras layer in a Sequential and a functional model
#   lstm_timeseries     LSTM(50) on a noisy sine series, look_back 3 (train/test RMSE, CSV)
#   cifar10_cnn         the CIFAR-10 tutorial CNN on synthetic CIFAR-10-format files (augmented
#                       Dataset pipeline, EarlyStopping, ModelCheckpoint)
#   fashion_mnist       a CNN on the real Fashion-MNIST data (Debian's dataset-fashion-mnist):
#                       at least 90% test accuracy
# Each program exits non-zero when its result is off, and so does this script.
#
#   bash scripts/run.sh            (from any directory)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
JOBS="$(nproc)"
START=$SECONDS

step() { printf '\n==== [%s] %s ====\n' "$(date +%H:%M:%S)" "$*"; }

SAMPLES=(linear_regression custom_layer lstm_timeseries cifar10_cnn fashion_mnist distillation)

step "1/8 setup: Debian packages (scripts/setup.sh)"
bash scripts/setup.sh

step "2/8 configure: cmake -S . -B build (Release)"
# shellcheck source=scripts/generator.sh
source "$ROOT/scripts/generator.sh"
cmake -S . -B build -G "$(keel_generator build)" -DCMAKE_BUILD_TYPE=Release -DKEEL_BUILD_SAMPLES=ON

# Only the library and the samples: the tests and benchmarks are scripts/test.sh's business.
step "3/8 build: the samples (-j${JOBS})"
cmake --build build -j"${JOBS}" --target "${SAMPLES[@]}"

# Files the samples write (checkpoint, predictions) go to a scratch folder, not the work tree.
OUT="$(mktemp -d)"
trap 'rm -rf "$OUT"' EXIT

step "4/8 run: build/samples/linear_regression"
build/samples/linear_regression

step "5/8 run: build/samples/custom_layer"
build/samples/custom_layer

step "6/8 run: build/samples/lstm_timeseries (look_back 3, 20 epochs, batch 1)"
build/samples/lstm_timeseries --out "$OUT/lstm_predictions.csv"

step "7/8 run: build/samples/cifar10_cnn on 4000 synthetic CIFAR-10 records, 5 epochs"
build/samples/cifar10_cnn --synthetic 4000 --epochs 5 --checkpoint "$OUT/cifar10_cnn.weights.safetensors"

step "8/8 run: build/samples/fashion_mnist (the real Fashion-MNIST, 60,000 training images)"
if [ -d /usr/share/datasets/fashion-mnist ]; then
  build/samples/fashion_mnist
else
  echo "Fashion-MNIST is missing: install Debian's dataset-fashion-mnist package" \
    "(bash scripts/setup.sh, or apt-get install dataset-fashion-mnist) and run again." >&2
  exit 1
fi

step "done ($((SECONDS - START))s)"
