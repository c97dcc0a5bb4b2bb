#!/usr/bin/env bash
# Runs every test of accel-sim on a fresh machine: installs what the tests need, then the C++
# unit tests (a Release build, and a Debug build under AddressSanitizer + UndefinedBehaviorSanitizer)
# and the Python tests. Exits non-zero on the first failure. Screenshots the browser tests keep
# are left in build/test-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."

# From Debian's packages, only what is missing: GoogleTest for the C++ tests; Chromium, which
# tests/browser.py drives headless to open the HTML reports, and fonts-liberation (Arial/Times/
# Courier metrics) for their text -- fonts-dejavu-core comes anyway with fontconfig. Without
# recommends: chromium's would add a printer dialog, a GL driver and a notification daemon.
need=()
[ -f /usr/include/gtest/gtest.h ] || need+=(libgtest-dev)
command -v chromium >/dev/null || command -v chromium-browser >/dev/null \
  || command -v google-chrome >/dev/null || need+=(chromium)
dpkg-query -W -f='${Status}' fonts-liberation 2>/dev/null | grep -q "ok installed" || need+=(fonts-liberation)
if [ ${#need[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
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

# One pytest worker per core (pytest-xdist): most tests run the CLI in a subprocess, one core each.
python3 -m pytest -q -n auto tests
