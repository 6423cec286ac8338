# Shared by the consumer tests: `source "$CONSUMERS/lib.sh"`.
# Everything a test starts goes in its own process group (tests/consumers/run uses setsid), and `cleanup`
# kills what is left when the test exits.

fail() { echo "FAIL: $*" >&2; exit 1; }
note() { echo "$*" >&2; }

cleanup() {
  local status=$?
  trap '' TERM
  # Whatever the test had to say is said; bash's notices of the jobs killed below are noise.
  exec 2>/dev/null
  if [ "$(ps -o pgid= $$ | tr -d ' ')" = "$$" ]; then
    # Run by tests/consumers/run (setsid): the whole group but this shell, grandchildren included.
    kill -TERM -- -$$ 2>/dev/null || true
    sleep 0.5
    # The list first: a pipeline that kills would be in the group it kills.
    local left
    left=$(pgrep -g $$ | grep -vx $$ || true)
    [ -z "$left" ] || kill -KILL $left 2>/dev/null || true
  else
    jobs -p | xargs -r kill 2>/dev/null || true
  fi
  exit $status
}
trap cleanup EXIT

# wait_until SECONDS DESCRIPTION COMMAND...: runs COMMAND every 0.2 s until it succeeds, or fails the test.
wait_until() {
  local seconds=$1 what=$2; shift 2
  local deadline=$((SECONDS + seconds))
  until "$@"; do
    [ $SECONDS -lt $deadline ] || fail "waited $seconds s for $what"
    sleep 0.2
  done
}

# ocr IMAGE: the text tesseract reads in IMAGE, scaled up three times (bar fonts are small).
ocr() {
  local scaled="${1%.png}-ocr.png"
  convert "$1" -resize 300% -colorspace Gray -normalize "$scaled"
  tesseract "$scaled" - --psm 6 2>/dev/null
}

# ocr_bright IMAGE [tsv]: ocr for light or colored text on a dark bar: each pixel's brightest channel, inverted,
# so red or blue text reads as well as white. With `tsv`, tesseract's word boxes (in pixels of the 3x image).
ocr_bright() {
  local scaled="${1%.png}-ocr.png"
  convert "$1" -resize 300% -separate -evaluate-sequence max -negate "$scaled"
  tesseract "$scaled" - --psm 6 "${@:2}" 2>/dev/null
}

# start_http_server DIR: serves DIR/NAME's bytes for GET /NAME (503 when it does not exist) on 127.0.0.1, logs
# each request's path to DIR/requests.log, and sets HTTP_PORT.
start_http_server() {
  local dir=$1
  rm -f "$dir/port"
  python3 "$CONSUMERS/http_server.py" "$dir" &
  wait_until 10 "the test's HTTP server" test -s "$dir/port"
  HTTP_PORT=$(cat "$dir/port")
}

# start_xvfb DISPLAY: an X server at 1280x200, 24-bit, for the X11 bars; sets DISPLAY.
# -noreset: by default an X server resets itself when its last client leaves, and the readiness probe below is
# its first and last client, so the bar would connect during that reset. Twice in CI a bar's first connection
# failed right after the probe had answered (i3: "Cannot open display"; polybar: "X connection error").
start_xvfb() {
  Xvfb "$1" -screen 0 1280x200x24 -nolisten tcp -noreset >"$ARTIFACTS/xvfb.log" 2>&1 &
  export DISPLAY=$1
  wait_until 10 "Xvfb on $1" xdpyinfo_quiet
}
xdpyinfo_quiet() { xwininfo -root >/dev/null 2>&1; }
