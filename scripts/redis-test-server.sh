#!/usr/bin/env bash
# A throwaway redis-server on loopback for the side-channel tests.
#
#   scripts/redis-test-server.sh start   # prints the port (state in a temp dir)
#   scripts/redis-test-server.sh stop PORT
#
#   export JACCL_TEST_REDIS=127.0.0.1:$(scripts/redis-test-server.sh start)
#
# No persistence (--save '' --appendonly no); its files live in
# ${TMPDIR:-/tmp}/jaccl-redis-test-PORT and are removed by stop.
set -euo pipefail

state_dir() { echo "${TMPDIR:-/tmp}/jaccl-redis-test-$1"; }

start() {
  command -v redis-server >/dev/null || {
    echo "redis-server is not installed: run scripts/setup.sh" >&2; exit 1; }
  for _ in $(seq 1 20); do
    local port=$(( (RANDOM << 15 | RANDOM) % 30000 + 20000 ))
    local dir; dir=$(state_dir "$port")
    mkdir -p "$dir"
    if redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
         --daemonize yes --dir "$dir" --pidfile "$dir/redis.pid" \
         --logfile "$dir/redis.log" >/dev/null 2>&1; then
      for _ in $(seq 1 100); do
        if redis-cli -p "$port" ping 2>/dev/null | grep -q PONG; then
          echo "$port"; return 0
        fi
        # The daemon exits at once when the port is taken.
        if [ -s "$dir/redis.log" ] && grep -q -i "address already in use" "$dir/redis.log"; then
          break
        fi
        sleep 0.05
      done
    fi
    stop "$port" >/dev/null 2>&1 || true
  done
  echo "could not start redis-server on a free port" >&2
  exit 1
}

stop() {
  local port=${1:?usage: $0 stop PORT}
  local dir; dir=$(state_dir "$port")
  if [ -f "$dir/redis.pid" ]; then
    local pid; pid=$(cat "$dir/redis.pid")
    kill "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
  fi
  rm -rf "$dir"
}

case "${1:-}" in
  start) start ;;
  stop) shift; stop "$@" ;;
  *) echo "usage: $0 start | stop PORT" >&2; exit 2 ;;
esac
