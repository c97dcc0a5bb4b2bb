#!/usr/bin/env bash
# Runs every test of accel-sim on a fresh machine: installs what the tests need, then the C++
# unit tests (a Release build, and a Debug build under AddressSanitizer + UndefinedBehaviorSanitizer)
# and the Python tests. Exits non-zero on the first failure.
set -euo pipefail
cd "$(dirname "$0")/.."

# GoogleTest comes from Debian's packages.
if [ ! -f /usr/include/gtest/gtest.h ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq libgtest-dev >/dev/null
fi

# torch first and pinned: an open range on a machine without torch pulls a multi-GB CUDA build.
python3 -m pip install -q torch==2.13.0
python3 -m pip install -q cmake ninja
python3 -m pip install -q ".[test]"

for config in "release:-DCMAKE_BUILD_TYPE=Release" \
              "sanitize:-DCMAKE_BUILD_TYPE=Debug -DACCELSIM_SANITIZE=address,undefined"; do
  name="${config%%:*}"
  flags="${config#*:}"
  # shellcheck disable=SC2086
  cmake -S . -B "build/cpp-$name" -G Ninja $flags >/dev/null
  cmake --build "build/cpp-$name" -j 2
  ctest --test-dir "build/cpp-$name" --output-on-failure --no-tests=error
done

python3 -m pytest -q tests
