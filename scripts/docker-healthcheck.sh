#!/bin/bash
# The Docker images' HEALTHCHECK, installed as /opt/relserve/bin/relserve-healthcheck: healthy
# (exit 0) while relserve serves, whatever ports and TLS the container was started with.
#
# It reads the server's own configuration the way the server does: a flag on relserve's command
# line (from /proc/PID/cmdline, so `docker run IMAGE --metrics-port 9191` counts), else its
# RELSERVE_<FLAG> variable (from /proc/PID/environ, so `docker run -e RELSERVE_METRICS_PORT=9191`
# counts), else relserve's default. Then it probes, in this order:
#   1. GET /healthz on the metrics port (--metrics-address, --metrics-port; 9090): 200 while
#      every model serves and the gRPC listener accepts connections (its self-check), 503 else;
#      the same check the Kubernetes probes use with TLS;
#   2. where the metrics port is off (-1) or picked at start (0): GET /health on the HTTP API
#      (--http-address; 0.0.0.0:8080), 200 while serving, open without an API key;
#   3. where both are off: gRPC health (relserve-client health) on --grpc-address, plaintext
#      only: with --tls-cert the certificate's name and CA are unknown here, and this reports
#      unhealthy, naming the flags to turn a plain-HTTP port back on.
# Both HTTP ports are plain HTTP even when gRPC uses TLS (--tls-cert covers gRPC only), and
# neither needs the API key. The probe has no tool beyond bash's /dev/tcp and coreutils.
#
#   relserve-healthcheck [PID]     PID: the server's process (default: the first process
#                                  named relserve or relserve-server)
set -u

probe_timeout=2

find_server() {
  local p argv0
  for p in /proc/[0-9]*; do
    [ -r "$p/cmdline" ] || continue
    IFS= read -r -d '' argv0 < "$p/cmdline" 2> /dev/null || continue
    case "${argv0##*/}" in
      relserve | relserve-server) echo "${p#/proc/}"; return 0 ;;
    esac
  done
  return 1
}

pid="${1:-}"
if [ -z "$pid" ]; then
  pid=$(find_server) || { echo "unhealthy: no relserve process is running"; exit 1; }
elif [ ! -e "/proc/$pid" ]; then
  echo "unhealthy: relserve (process $pid) is not running"
  exit 1
fi

# The server's arguments and its RELSERVE_ variables (our own environment if its is unreadable:
# a HEALTHCHECK runs with the container's environment).
args=()
if [ -r "/proc/$pid/cmdline" ]; then
  mapfile -d '' -t args < "/proc/$pid/cmdline"
fi
declare -A env_of=()
if [ -r "/proc/$pid/environ" ] && mapfile -d '' -t server_env < "/proc/$pid/environ" 2> /dev/null; then
  for e in "${server_env[@]}"; do
    case "$e" in RELSERVE_*=*) env_of["${e%%=*}"]="${e#*=}" ;; esac
  done
else
  while IFS= read -r -d '' e; do
    case "$e" in RELSERVE_*=*) env_of["${e%%=*}"]="${e#*=}" ;; esac
  done < <(env -0)
fi

# setting FLAG DEFAULT: the flag's last value on the command line, else RELSERVE_<FLAG> (set,
# even empty), else DEFAULT. `--flag value` and `--flag=value` both count; a flag followed by
# another flag (a bare boolean) takes no value.
setting() {
  local flag="$1" default="$2" value="" found=0 i a
  for ((i = 1; i < ${#args[@]}; i++)); do
    a="${args[i]}"
    case "$a" in
      "--$flag="*) value="${a#*=}"; found=1 ;;
      "--$flag")
        if ((i + 1 < ${#args[@]})); then value="${args[i + 1]}"; found=1; i=$((i + 1)); fi ;;
      --*=*) ;;
      --*) if ((i + 1 < ${#args[@]})) && [[ "${args[i + 1]}" != --* ]]; then i=$((i + 1)); fi ;;
    esac
  done
  if [ "$found" = 1 ]; then printf '%s' "$value"; return; fi
  local var="RELSERVE_${flag^^}"
  var="${var//-/_}"
  if [ -n "${env_of[$var]+set}" ]; then printf '%s' "${env_of[$var]}"; else printf '%s' "$default"; fi
}

# A listening address as a host to connect to: the wildcard addresses become loopback.
connect_host() {
  local h="${1#[}"
  h="${h%]}"
  case "$h" in "" | 0.0.0.0 | :: | "*") h=127.0.0.1 ;; esac
  printf '%s' "$h"
}

# http_get HOST PORT PATH: exit 0 on a 200 answer; prints the status line and the body's first
# line (a 503 says why). Run under `timeout`, which bounds the connect too.
# shellcheck disable=SC2317  # called through `bash -c`
http_get() {
  local status line body="" cr=$'\r'
  exec 3<> "/dev/tcp/$1/$2" || return 1
  printf 'GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n' "$3" "$1" >&3
  IFS= read -r status <&3 || return 1
  status="${status%"$cr"}"
  while IFS= read -r line <&3 && [ -n "${line%"$cr"}" ]; do :; done
  IFS= read -r body <&3 || true
  echo "$status${body:+: ${body%"$cr"}}"
  [[ "$status" =~ ^HTTP/1\.[01]\ 200 ]]
}
export -f http_get

metrics_port=$(setting metrics-port 9090)
metrics_host=$(connect_host "$(setting metrics-address 0.0.0.0)")
http_address=$(setting http-address 0.0.0.0:8080)

if [[ "$metrics_port" =~ ^[1-9][0-9]*$ ]]; then
  host="$metrics_host" port="$metrics_port" path=/healthz
elif [ -n "$http_address" ] && [ "$http_address" != -1 ] && [[ "${http_address##*:}" =~ ^[1-9][0-9]*$ ]]; then
  host=$(connect_host "${http_address%:*}") port="${http_address##*:}" path=/health
else
  grpc_address=$(setting grpc-address 0.0.0.0:50051)
  if [ -n "$(setting tls-cert "")" ]; then
    echo "unhealthy: gRPC uses TLS (--tls-cert) and neither the metrics port nor the HTTP API is on" \
      "(--metrics-port $metrics_port, --http-address '$http_address'): give one of them a fixed port to probe"
    exit 1
  fi
  target="$(connect_host "${grpc_address%:*}"):${grpc_address##*:}"
  if out=$(relserve-client health --quiet --target "$target" --deadline-ms $((probe_timeout * 1000)) 2>&1); then
    echo "healthy: gRPC health on $target"
    exit 0
  fi
  echo "unhealthy: gRPC health on $target: $out"
  exit 1
fi

what="GET http://$host:$port$path"
if answer=$(timeout "$probe_timeout" bash -c 'http_get "$@"' http_get "$host" "$port" "$path" 2> /dev/null); then
  echo "healthy: $what: $answer"
  exit 0
fi
echo "unhealthy: $what: ${answer:-no answer within ${probe_timeout}s}"
exit 1
