# Shared by the Wayland consumer tests (waybar, swaybar): `source "$CONSUMERS/sway.sh"` after lib.sh.
# A headless sway of the test's own: its Wayland and IPC sockets live in $ARTIFACTS/runtime, so tests running
# side by side never meet.

# start_sway CONFIG: starts sway on headless 1280x200 outputs (one, or SWAY_OUTPUTS) (pixman, no GPU, no input device, no seat
# daemon) and waits for its socket; sets XDG_RUNTIME_DIR, WAYLAND_DISPLAY and SWAYSOCK.
start_sway() {
  export XDG_RUNTIME_DIR="$ARTIFACTS/runtime"
  rm -rf "$XDG_RUNTIME_DIR"; mkdir -m 0700 "$XDG_RUNTIME_DIR"
  export WLR_BACKENDS=headless WLR_RENDERER=pixman WLR_LIBINPUT_NO_DEVICES=1 WLR_HEADLESS_OUTPUTS=${SWAY_OUTPUTS:-1}
  unset WAYLAND_DISPLAY SWAYSOCK DISPLAY I3SOCK
  local as=()
  if [ "$(id -u)" = 0 ]; then
    # sway 1.7 refuses to start as root ("Unable to drop root"): it checks that setuid(0) fails. In a user
    # namespace where uid 1000 stands for root, it does, while files stay root's (CI runs as root).
    as=(unshare --user --map-user=1000 --map-group=1000)
    "${as[@]}" true || fail "sway cannot run as root, and this kernel does not allow a user namespace"
  fi
  "${as[@]}" sway -c "$1" >"$ARTIFACTS/sway.log" 2>&1 &
  SWAY_PID=$!
  wait_until 20 "sway's Wayland socket" sway_socket_exists
  WAYLAND_DISPLAY=$(basename "$(ls "$XDG_RUNTIME_DIR"/wayland-[0-9] | head -1)")
  SWAYSOCK=$(ls "$XDG_RUNTIME_DIR"/sway-ipc.*.sock | head -1)
  export WAYLAND_DISPLAY SWAYSOCK
  wait_until 10 "sway's IPC" swaymsg_quiet -t get_version
}
sway_socket_exists() {
  kill -0 "$SWAY_PID" 2>/dev/null || fail "sway exited: $(tail -5 "$ARTIFACTS/sway.log")"
  compgen -G "$XDG_RUNTIME_DIR/wayland-[0-9]" >/dev/null && compgen -G "$XDG_RUNTIME_DIR/sway-ipc.*.sock" >/dev/null
}

# stop_sway: asks sway to exit, so that it ends its bars and they end their status commands (swaybar starts
# the status command in a process group of its own, which the cleanup trap does not reach).
stop_sway() {
  [ -n "${SWAY_PID:-}" ] || return 0
  swaymsg exit >/dev/null 2>&1 || true
  local deadline=$((SECONDS + 10))
  while kill -0 "$SWAY_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill "$SWAY_PID" 2>/dev/null || true
}

# hammock_wrapper FILE: writes an executable FILE that records its pid in FILE.pid and becomes hammock with
# its arguments, so a test knows the pid of the hammock a bar started (bars start their commands in process
# groups of their own) and can end it if the bar does not.
hammock_wrapper() {
  printf '#!/bin/sh\necho $$ > "%s.pid"\nexec "%s" "$@"\n' "$1" "$HAMMOCK" >"$1"
  chmod +x "$1"
}
# stop_wrapped FILE: ends the hammock that FILE started, if it still runs.
stop_wrapped() {
  [ -s "$1.pid" ] || return 0
  local pid; pid=$(cat "$1.pid")
  kill "$pid" 2>/dev/null || return 0
  local deadline=$((SECONDS + 5))
  while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  kill -KILL "$pid" 2>/dev/null || true
}

# screenshot NAME HEIGHT: the top HEIGHT pixels of the output (where the test put its bar) in $ARTIFACTS/NAME.png.
screenshot() {
  grim -g "0,0 1280x$2" "$ARTIFACTS/$1.png"
}

# read_bar IMAGE: the text tesseract reads in IMAGE, read twice: in plain gray (white on a colored background)
# and in the brightest of the three channels (colored text on black, such as swaybar's red error line, is too
# dark in plain gray). Unlike lib.sh's `ocr`, it does not scale: these bars use fonts of 28 px and more, which
# tesseract reads at their size and no longer reads at three times it.
read_bar() {
  local gray="${1%.png}-ocr.png" bright="${1%.png}-ocr-bright.png"
  convert "$1" -colorspace Gray -normalize -bordercolor white -border 10 "$gray"
  convert "$1" -separate -evaluate-sequence Max -normalize -bordercolor black -border 10 "$bright"
  tesseract "$gray" - --psm 6 2>/dev/null
  tesseract "$bright" - --psm 6 2>/dev/null
}

# wait_for_text SECONDS NAME HEIGHT REGEX: takes screenshots (NAME.png, its OCR in NAME.txt) until the OCR
# matches REGEX (grep -Ei), or fails the test with what was read last.
wait_for_text() {
  local seconds=$1 name=$2 height=$3 regex=$4
  local deadline=$((SECONDS + seconds))
  while true; do
    screenshot "$name" "$height"
    read_bar "$ARTIFACTS/$name.png" >"$ARTIFACTS/$name.txt"
    grep -Eqi -- "$regex" "$ARTIFACTS/$name.txt" && return 0
    [ $SECONDS -lt $deadline ] || fail "$name: waited $seconds s for /$regex/ on the bar; read: $(tr '\n' ' ' <"$ARTIFACTS/$name.txt")"
    sleep 0.5
  done
}

# requests_for PATH DIR: how many times the test's HTTP server serving DIR was asked for /PATH.
requests_for() {
  local count; count=$(grep -cx "/$1" "$2/requests.log" 2>/dev/null)
  echo "${count:-0}"
}

# click X Y [BUTTON]: a pointer click at X,Y of the output, through a virtual pointer (headless sway has none).
click() {
  python3 "$CONSUMERS/wayland_click.py" "$@"
}
swaymsg_quiet() { swaymsg "$@" >/dev/null 2>&1; }
