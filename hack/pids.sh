# Sourced by the test bed's scripts: the processes they start, by recorded pid. A recorded pid
# is ours only while that process still runs the program it was recorded for: after a reboot,
# a crash or a long run the number may belong to anything, which a start must not take for
# running nor a stop kill.

ours() {  # pidfile name: the recorded process is alive and runs `name` (or `name`.py)
  local pid arg args=() stat
  [[ -f $1 ]] && pid=$(<"$1") && [[ $pid =~ ^[0-9]+$ ]] || return 1
  for _ in $(seq 30); do
    # The program, or the script an interpreter runs: its first two arguments.
    mapfile -d '' -n 2 args 2>/dev/null <"/proc/$pid/cmdline" || return 1
    for arg in "${args[@]}"; do
      [[ ${arg##*/} == "$2" || ${arg##*/} == "$2.py" ]] && return 0
    done
    # A child this shell has just started may not run its program yet (between fork and
    # exec it is still this shell, with this shell's arguments): asked at once after
    # `cmd &`, it gets a moment to.
    stat=$(<"/proc/$pid/stat") 2>/dev/null || return 1
    stat=${stat##*) }  # the fields after the command's name, which may hold spaces
    read -r _ stat _ <<<"$stat"  # the state, then the parent's pid
    [[ $stat == "$$" || $stat == "$BASHPID" ]] || return 1
    cmp -s "/proc/$pid/cmdline" "/proc/$stat/cmdline" || return 1
    sleep 0.1
  done
  return 1
}

stop_ours() {  # pidfile name: TERM, then KILL after 5 s; false when nothing of ours ran
  local pid stopped=1
  if ours "$1" "$2"; then
    pid=$(<"$1")
    kill "$pid" 2>/dev/null || true  # it may have just ended
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    stopped=0
  fi
  rm -f "$1"
  return $stopped
}
