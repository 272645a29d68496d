# Shared by the block (NBD) system tests. Source after setting VSLD, VSLCTL.
#   T        scratch directory (removed on exit)
#   SOCK     control socket; NSOCK the NBD socket next to it
set -euo pipefail
T=$(mktemp -d)
SOCK="$T/vsld.sock"
NSOCK="$T/vsld-nbd.sock"
PID=""
CLEANUP_HOOKS=()
cleanup() {
  local h
  for h in "${CLEANUP_HOOKS[@]}"; do eval "$h" || true; done
  if [ -n "$PID" ]; then kill -KILL "$PID" 2>/dev/null || true; fi
  rm -rf "$T"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*" >&2
  [ -f "$T/vsld.log" ] && tail -30 "$T/vsld.log" >&2
  exit 1
}
skip() {
  echo "SKIP: $*"
  exit 77
}
# libnbd's Python bindings are Debian's: use Debian's python3 even if another is first on PATH.
export PATH="/usr/bin:$PATH"
ctl() { "$VSLCTL" --socket "$SOCK" "$@"; }
uri() { echo "nbd+unix:///$1?socket=$NSOCK"; }
# make_card SECTOR_BYTES [create-card args]: a duo-slc-small card formatted dual pipe.
make_card() {
  local sector="$1"
  shift
  "$VSLCTL" create-card "$T/card" --profile duo-slc-small "$@" >/dev/null
  start
  ctl format --yes --sector-size "$sector" >/dev/null || fail "format"
}
# start [vsld args]: starts vsld on $T/card and waits for both sockets.
# VSLD_ARGS (an array, empty by default) is passed to every start.
VSLD_ARGS=()
start() {
  "$VSLD" --card "$T/card" --socket "$SOCK" --log-level info "${VSLD_ARGS[@]}" "$@" >>"$T/vsld.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 400); do
    if [ -S "$SOCK" ] && ctl --json status >/dev/null 2>&1; then
      if [ -S "$NSOCK" ] || ! grep -q -- "--nbd-socket" <<<"$*"; then return 0; fi
    fi
    kill -0 "$PID" 2>/dev/null || fail "vsld exited at start"
    sleep 0.05
  done
  fail "vsld did not come up"
}
# start_spec SPEC: starts vsld on card SPEC (e.g. rtl:$T/card: a co-simulated card, slow
# to attach) and waits for the control and NBD sockets.
start_spec() {
  "$VSLD" --card "$1" --socket "$SOCK" --log-level info >>"$T/vsld.log" 2>&1 &
  PID=$!
  for _ in $(seq 1 1200); do
    if [ -S "$SOCK" ] && [ -S "$NSOCK" ] && ctl --json status >/dev/null 2>&1; then return 0; fi
    kill -0 "$PID" 2>/dev/null || fail "vsld exited at start"
    sleep 0.1
  done
  fail "vsld did not come up"
}
stop() {
  kill -TERM "$PID"
  wait "$PID" || fail "vsld exit code $? on SIGTERM"
  PID=""
}
crash() {
  kill -KILL "$PID"
  wait "$PID" 2>/dev/null || true
  PID=""
}
# same_prefix URI BYTES FILE: the first BYTES of the export equal those of FILE (nbdcopy
# is cut off by the pipe once cmp has seen enough, which is not a failure).
same_prefix() { ( set +o pipefail; nbdcopy "$1" - 2>/dev/null | cmp -n "$2" - "$3" ); }
