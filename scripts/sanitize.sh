#!/usr/bin/env bash
# Runs relserve under sanitizers and fuzzes the parsers that read files and network input.
# Exits non-zero when any part finds something (or fails to build).
#
#   scripts/sanitize.sh              all three parts
#   scripts/sanitize.sh asan fuzz    only the parts named
#
#   asan  build-asan: the whole test suite under AddressSanitizer + UndefinedBehaviorSanitizer
#   tsan  build-tsan: the tests of tests/batching and tests/server under ThreadSanitizer
#   fuzz  build-fuzz: replays tests/fuzz/seeds and tests/fuzz/regressions, then runs each
#         libFuzzer target for FUZZ_SECONDS
#
# Environment: FUZZ_SECONDS (default 60, per target), JOBS (build parallelism, default 2),
# CTEST_JOBS (default JOBS), SANITIZE_CC/SANITIZE_CXX (asan and tsan; default gcc/g++, the
# compiler of the normal build), FUZZ_CC/FUZZ_CXX (default clang/clang++: libFuzzer is Clang's).
#
# Sanitizers refuse the RTLD_DEEPBIND load of the SentencePiece module that Debian's
# libsentencepiece needs, so each build tokenizes with a SentencePiece rebuilt here from
# Debian's source package against the system libprotobuf (once per sanitizer), configured in
# with RELSERVE_SENTENCEPIECE_PREFIX. The tsan part also runs with Abseil rebuilt with
# ThreadSanitizer (see build_abseil_tsan). Sources and builds of these live in
# build-sanitizer-deps/ (apt-get source needs dpkg-dev and Debian's archive).
#
# Every sanitizer report is fatal and also written under <build>/sanitizer-logs/, which
# catches reports from processes whose exit status a test does not look at (servers started
# by the shell tests). tests/sanitizer/ holds the suppressions for third-party libraries.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

FUZZ_SECONDS=${FUZZ_SECONDS:-60}
JOBS=${JOBS:-2}
CTEST_JOBS=${CTEST_JOBS:-$JOBS}
SANITIZE_CC=${SANITIZE_CC:-gcc}
SANITIZE_CXX=${SANITIZE_CXX:-g++}
FUZZ_CC=${FUZZ_CC:-clang}
FUZZ_CXX=${FUZZ_CXX:-clang++}

parts=("$@")
if [ "${#parts[@]}" -eq 0 ]; then parts=(asan tsan fuzz); fi
for part in "${parts[@]}"; do
  case "$part" in
    asan|tsan|fuzz) ;;
    *) echo "usage: $0 [asan] [tsan] [fuzz]" >&2; exit 2 ;;
  esac
done

scripts/install-deps.sh --sanitize

DEPS_DIR=$ROOT/build-sanitizer-deps
SUPPRESSIONS=$ROOT/tests/sanitizer

log() { echo "sanitize: $*"; }

# --- Dependencies rebuilt from Debian's source packages ------------------------------------

# fetch_source PACKAGE: Debian's source package, unpacked once into $DEPS_DIR/src/PACKAGE/tree.
# apt reads a private deb-src list and state, so the system's apt configuration is left alone.
fetch_source() {
  local package=$1
  local dir=$DEPS_DIR/src/$package
  if [ -e "$dir/tree" ]; then return; fi
  local apt=(apt-get -qq -o "Dir::Etc::SourceList=$DEPS_DIR/apt/sources.list"
             -o Dir::Etc::SourceParts=/dev/null -o "Dir::State::Lists=$DEPS_DIR/apt/lists"
             -o "Dir::Cache=$DEPS_DIR/apt/cache" -o Debug::NoLocking=1)
  if [ ! -f "$DEPS_DIR/apt/updated" ]; then
    mkdir -p "$DEPS_DIR/apt/lists/partial" "$DEPS_DIR/apt/cache/archives/partial"
    echo "deb-src http://deb.debian.org/debian bookworm main" > "$DEPS_DIR/apt/sources.list"
    "${apt[@]}" update
    touch "$DEPS_DIR/apt/updated"
  fi
  rm -rf "$dir"
  mkdir -p "$dir"
  (cd "$dir" && "${apt[@]}" source "$package")
  local tree
  tree=$(find "$dir" -mindepth 1 -maxdepth 1 -type d | head -1)
  [ -n "$tree" ] || { echo "sanitize: apt-get source $package unpacked nothing" >&2; return 1; }
  if [ "$package" = sentencepiece ]; then
    # With SPM_USE_BUILTIN_PROTOBUF=OFF the library uses the system protobuf, except init.h,
    # which still names the bundled copy's header.
    sed -i 's|#include "third_party/protobuf-lite/google/protobuf/message_lite.h"|#include <google/protobuf/message_lite.h>|' \
      "$tree/src/init.h"
    grep -q '<google/protobuf/message_lite.h>' "$tree/src/init.h"
  fi
  ln -sfn "$tree" "$dir/tree"
}

# build_sentencepiece NAME CC CXX FLAGS: libsentencepiece.so compiled with FLAGS (the same
# compiler and sanitizer runtime as the build that loads it) and linked against the full system
# libprotobuf (the one gRPC and LibTorch load), into $DEPS_DIR/sentencepiece-NAME/prefix.
build_sentencepiece() {
  local name=$1 cc=$2 cxx=$3 flags=$4
  local build=$DEPS_DIR/sentencepiece-$name/build prefix=$DEPS_DIR/sentencepiece-$name/prefix
  local stamp="$cc $cxx $flags"
  if [ -f "$prefix/.stamp" ] && [ "$(cat "$prefix/.stamp")" = "$stamp" ]; then return; fi
  fetch_source sentencepiece
  local protobuf
  protobuf=$(find /usr/lib /usr/lib64 -name libprotobuf.so -print -quit 2>/dev/null)
  [ -n "$protobuf" ] || { echo "sanitize: libprotobuf.so not found (libprotobuf-dev)" >&2; return 1; }
  rm -rf "$build" "$prefix"
  log "building SentencePiece ($name) against the system libprotobuf"
  cmake --log-level=WARNING -S "$DEPS_DIR/src/sentencepiece/tree" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags" \
    -DSPM_USE_BUILTIN_PROTOBUF=OFF -DSPM_ENABLE_TCMALLOC=OFF -DProtobuf_LITE_LIBRARY="$protobuf"
  cmake --build "$build" --parallel "$JOBS" --target sentencepiece > "$build/build.log" ||
    { tail -n 40 "$build/build.log"; return 1; }
  mkdir -p "$prefix/lib" "$prefix/include"
  cp -P "$build"/src/libsentencepiece.so* "$prefix/lib/"
  cp "$DEPS_DIR/src/sentencepiece/tree/src/sentencepiece_processor.h" "$prefix/include/"
  echo "$stamp" > "$prefix/.stamp"
}

# build_abseil_tsan CC CXX: Abseil's shared libraries built with -fsanitize=thread from Debian's
# source, with Debian's options, into $DEPS_DIR/abseil-tsan/lib. ThreadSanitizer cannot see the
# atomics and futexes inside Debian's uninstrumented absl::Mutex and absl::call_once, so without
# these every access they order (the batcher's queue, gRPC's internals) reads as a race;
# instrumented, they tell ThreadSanitizer what they synchronize. All of Abseil, because a symbol
# such as CallOnceImpl is served by whichever Abseil library loads first. The tsan part puts the
# folder first on LD_LIBRARY_PATH: same sonames, same ABI.
build_abseil_tsan() {
  local cc=$1 cxx=$2
  local build=$DEPS_DIR/abseil-tsan/build lib=$DEPS_DIR/abseil-tsan/lib
  local flags="-fsanitize=thread -fno-omit-frame-pointer -g1"
  local stamp="$cc $cxx $flags"
  if [ -f "$lib/.stamp" ] && [ "$(cat "$lib/.stamp")" = "$stamp" ]; then return; fi
  fetch_source abseil
  rm -rf "$build" "$lib"
  log "building Abseil with ThreadSanitizer"
  # debian/rules: -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON.
  cmake --log-level=WARNING -S "$DEPS_DIR/src/abseil/tree" -B "$build" -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_STANDARD=17 -DBUILD_SHARED_LIBS=ON \
    -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_SHARED_LINKER_FLAGS="$flags"
  cmake --build "$build" --parallel "$JOBS" > "$build/build.log" ||
    { tail -n 40 "$build/build.log"; return 1; }
  mkdir -p "$lib"
  find "$build" -name 'libabsl_*.so*' -exec cp -P {} "$lib/" \;
  echo "$stamp" > "$lib/.stamp"
}

# --- relserve builds ----------------------------------------------------------------------

# configure BUILD_DIR CXX SANITIZERS SPM_NAME [cmake args...]
configure() {
  local dir=$1 cxx=$2 sanitizers=$3 spm=$4
  shift 4
  # A build folder configured with another compiler starts afresh.
  if [ -f "$dir/CMakeCache.txt" ] &&
     ! grep -qx "CMAKE_CXX_COMPILER:[A-Z]*=$(command -v "$cxx")" "$dir/CMakeCache.txt"; then
    rm -rf "$dir"
  fi
  local launcher=()
  if command -v ccache > /dev/null 2>&1; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
  # -O1: sanitizer reports stay close to the source, and the build is quicker than -O3.
  cmake --log-level=WARNING -S . -B "$dir" -G Ninja -DCMAKE_CXX_COMPILER="$cxx" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" "${launcher[@]}" -DRELSERVE_SANITIZE="$sanitizers" \
    -DRELSERVE_SENTENCEPIECE_PREFIX="$DEPS_DIR/sentencepiece-$spm/prefix" "$@"
}

# Each runtime writes its reports to <dir>/sanitizer-logs/<tool>.<pid> as well as failing the
# process; a part has found something when that folder is not empty afterwards.
sanitizer_env() {
  local dir=$1
  local logs=$ROOT/$dir/sanitizer-logs
  rm -rf "$logs"
  mkdir -p "$logs"
  local common="halt_on_error=1:print_stacktrace=1:symbolize=1"
  # allocator_may_return_null: a failed allocation returns null as glibc's does, so the code
  # that turns it into RESOURCE_EXHAUSTED runs (HostileConfigDeathTest caps the address space).
  export ASAN_OPTIONS="$common:log_path=$logs/asan:detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=1:strict_string_checks=1:allocator_may_return_null=1"
  export LSAN_OPTIONS="suppressions=$SUPPRESSIONS/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS="$common:log_path=$logs/ubsan:suppressions=$SUPPRESSIONS/ubsan.supp"
  export TSAN_OPTIONS="$common:log_path=$logs/tsan:second_deadlock_stack=1:suppressions=$SUPPRESSIONS/tsan.supp"
  if command -v llvm-symbolizer > /dev/null 2>&1; then
    ASAN_SYMBOLIZER_PATH=$(command -v llvm-symbolizer)
    export ASAN_SYMBOLIZER_PATH
  fi
}

# Prints every sanitizer log of a build; fails when there is one.
check_logs() {
  local logs=$ROOT/$1/sanitizer-logs
  local found
  found=$(find "$logs" -type f 2>/dev/null | sort)
  if [ -z "$found" ]; then return 0; fi
  log "sanitizer reports in $logs:"
  local f
  for f in $found; do
    echo "=== $f"
    cat "$f"
  done
  return 1
}

part_asan() {
  build_sentencepiece asan "$SANITIZE_CC" "$SANITIZE_CXX" "-fsanitize=address -fno-omit-frame-pointer -g1"
  configure build-asan "$SANITIZE_CXX" address,undefined asan
  sanitizer_env build-asan
  cmake --build build-asan --parallel "$JOBS"
  local rc=0
  ctest --test-dir build-asan --output-on-failure --parallel "$CTEST_JOBS" --timeout 1800 || rc=1
  check_logs build-asan || rc=1
  return $rc
}

part_tsan() {
  build_sentencepiece tsan "$SANITIZE_CC" "$SANITIZE_CXX" "-fsanitize=thread -fno-omit-frame-pointer -g1"
  build_abseil_tsan "$SANITIZE_CC" "$SANITIZE_CXX"
  configure build-tsan "$SANITIZE_CXX" thread tsan
  sanitizer_env build-tsan
  export LD_LIBRARY_PATH="$DEPS_DIR/abseil-tsan/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  # ThreadSanitizer's fixed memory layout needs the address-space layout unrandomized on
  # kernels with more ASLR entropy than it expects; setarch -R asks for that, unprivileged.
  local norandom=()
  if setarch "$(uname -m)" -R true 2> /dev/null; then norandom=(setarch "$(uname -m)" -R); fi
  "${norandom[@]}" cmake --build build-tsan --parallel "$JOBS" --target tests/batching/all tests/server/all
  local rc=0
  for dir in tests/batching tests/server; do
    "${norandom[@]}" ctest --test-dir "build-tsan/$dir" --output-on-failure --parallel "$CTEST_JOBS" \
      --timeout 1800 || rc=1
  done
  check_logs build-tsan || rc=1
  return $rc
}

part_fuzz() {
  build_sentencepiece fuzz "$FUZZ_CC" "$FUZZ_CXX" "-fsanitize=address -fno-omit-frame-pointer -g1"
  configure build-fuzz "$FUZZ_CXX" address,undefined fuzz -DRELSERVE_BUILD_FUZZERS=ON
  sanitizer_env build-fuzz
  cmake --build build-fuzz --parallel "$JOBS" --target tests/fuzz/all
  local rc=0
  # Every committed input once (ctest runs each fuzzer over its seeds and regressions).
  ctest --test-dir build-fuzz/tests/fuzz --output-on-failure --parallel "$CTEST_JOBS" || rc=1
  local fuzzer name corpus artifacts
  # The config fuzzer writes its model folders under TMPDIR; keep them inside the build.
  rm -rf build-fuzz/tmp
  mkdir -p build-fuzz/tmp
  export TMPDIR=$ROOT/build-fuzz/tmp
  for fuzzer in build-fuzz/bin/*_fuzzer; do
    name=$(basename "$fuzzer" _fuzzer)
    corpus=build-fuzz/fuzz-corpus/$name
    artifacts=build-fuzz/fuzz-artifacts/$name
    mkdir -p "$corpus" "$artifacts"
    log "fuzzing $name for ${FUZZ_SECONDS}s"
    # New inputs go to the first folder (kept between runs); the committed ones are read only.
    local dict=()
    if [ -f "tests/fuzz/$name.dict" ]; then dict=(-dict="tests/fuzz/$name.dict"); fi
    if ! "$fuzzer" -max_total_time="$FUZZ_SECONDS" -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "${dict[@]}" \
        "$corpus" "tests/fuzz/seeds/$name" "tests/fuzz/regressions/$name" \
        > "build-fuzz/fuzz-$name.log" 2>&1; then
      tail -n 60 "build-fuzz/fuzz-$name.log"
      log "$name: failing input saved in $artifacts/; once fixed, commit it to tests/fuzz/regressions/$name/"
      rc=1
    else
      grep -E '^stat::(number_of_executed_units|new_units_added)' "build-fuzz/fuzz-$name.log" || true
    fi
  done
  check_logs build-fuzz || rc=1
  return $rc
}

failed=()
for part in "${parts[@]}"; do
  start=$SECONDS
  log "--- $part"
  # A subshell outside any condition, so that set -e still stops the part at its first failure.
  set +e
  (set -e; "part_$part")
  rc=$?
  set -e
  if [ "$rc" -eq 0 ]; then
    log "$part: clean ($((SECONDS - start)) s)"
  else
    log "$part: FOUND PROBLEMS or failed to build ($((SECONDS - start)) s)"
    failed+=("$part")
  fi
done
if [ "${#failed[@]}" -gt 0 ]; then
  log "failed: ${failed[*]}"
  exit 1
fi
log "all clean: ${parts[*]}"
