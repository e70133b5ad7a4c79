#!/usr/bin/env bash
# Ensure a Docker engine answers on this machine (make engine); `engine.sh restart` restarts an idle one.
# Idempotent: returns at once when a daemon already answers. Otherwise installs Debian's docker.io when
# dockerd is missing, clears the pid file a killed daemon left behind, starts dockerd in the background
# (the lab machines have no systemd as PID 1) and waits for the socket.
set -euo pipefail

SOCKET=${SPARK_LAB_DOCKER_SOCKET:-/var/run/docker.sock}
LOG=${SPARK_LAB_DOCKERD_LOG:-/var/log/sparkfleet-dockerd.log}
WAIT=${SPARK_LAB_DOCKERD_WAIT:-90}

log() { echo "engine: $*" >&2; }

answers() { docker info --format '{{.ServerVersion}}' >/dev/null 2>&1; }

# dockerd processes of this machine only: the lab nodes' own engines are visible in the host's process
# table too, but live in their containers' PID namespaces.
host_dockerd() {
  local pid own
  own=$(readlink /proc/self/ns/pid)
  for pid in $(pgrep -x dockerd); do
    [[ $(readlink "/proc/$pid/ns/pid" 2>/dev/null) == "$own" ]] && echo "$pid"
  done
  return 0
}

install_engine() {
  log "dockerd missing: installing Debian's docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  # The package's init script may try to start the daemon; we start it ourselves below either way.
  apt-get install -y -qq --no-install-recommends docker.io iptables >/dev/null
}

clear_stale() {
  local pidfile
  for pidfile in /var/run/docker.pid /run/docker/containerd/containerd.pid; do
    if [[ -f $pidfile ]] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
      log "removing stale $pidfile (its process is gone)"
      rm -f "$pidfile"
    fi
  done
  # A socket file without a listener makes clients hang on a dead path; dockerd recreates it.
  if [[ -S $SOCKET ]] && [[ -z $(host_dockerd) ]]; then
    rm -f "$SOCKET"
  fi
}

start_daemon() {
  log "starting dockerd in the background (log: $LOG)"
  mkdir -p "$(dirname "$LOG")"
  nohup setsid dockerd >>"$LOG" 2>&1 </dev/null &
}

wait_socket() {
  local i
  for ((i = 0; i < WAIT; i++)); do
    answers && return 0
    sleep 1
  done
  log "no daemon answered within ${WAIT}s; last lines of $LOG:"
  tail -n 20 "$LOG" >&2 || true
  return 1
}

# The lab's nodes are reached as Sparks are, over SSH (lab/lab.py writes the key and known_hosts).
ensure_ssh_client() {
  command -v ssh >/dev/null && command -v ssh-keygen >/dev/null && return 0
  log "ssh missing: installing Debian's openssh-client"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends openssh-client >/dev/null
}

# `engine.sh restart`: restart an idle daemon (no container at all), which drops the network endpoints Docker
# 20.10 sometimes keeps after their containers were removed ("has active endpoints"). A daemon that runs any
# container is left alone: restarting it would stop them.
restart_idle() {
  local pid i
  if [[ -n $(docker ps -aq) ]]; then
    log "not restarting dockerd: containers exist ($(docker ps -a --format '{{.Names}}' | tr '\n' ' '))"
    return 1
  fi
  if command -v systemctl >/dev/null && systemctl is-active --quiet docker 2>/dev/null; then
    log "restarting docker.service (idle)"
    systemctl restart docker
  else
    for pid in $(host_dockerd); do
      log "stopping the idle dockerd ($pid)"
      kill -TERM "$pid"
      for ((i = 0; i < WAIT; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
    done
    clear_stale
    start_daemon
  fi
  wait_socket
  log "daemon answers again ($(docker info --format '{{.ServerVersion}}'))"
}

main() {
  ensure_ssh_client
  if [[ ${1:-} == restart ]]; then
    restart_idle
    return
  fi
  if answers; then
    log "daemon answers ($(docker info --format '{{.ServerVersion}} {{.Driver}} cgroup v{{.CgroupVersion}}'))"
    return 0
  fi
  command -v dockerd >/dev/null || install_engine
  if [[ -z $(host_dockerd) ]]; then
    clear_stale
    start_daemon
  else
    log "dockerd is running but not answering yet; waiting"
  fi
  wait_socket
  log "daemon answers ($(docker info --format '{{.ServerVersion}} {{.Driver}} cgroup v{{.CgroupVersion}}'))"
}

main "$@"
