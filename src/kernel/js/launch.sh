# Starts the JavaScript kernel driver: `sh -c LAUNCH kern-js-kernel DRIVER MARKER`.
# node cannot dup2, so the fds are arranged here: the control channel (the box's stdin/stdout)
# moves to fds 3/4, fd 0 becomes /dev/null, and fds 1/2 become the write ends of two pipes whose
# read ends the driver keeps as fds 5/6 (a pipe opened through /proc/self/fd/N for writing is
# the write end of that same pipe). The driver's command line is then
# `node --min-semi-space-size=8 -e DRIVER MARKER`, which is how the host finds it to interrupt a
# cell. The young generation starts at 8 MiB rather than 1: a cell printing 100 kB leaves a few
# hundred kB of garbage, and a collection every few cells was a tenth of what such a cell cost
# (it grows there anyway under load; this only skips the ramp).
command -v node >/dev/null 2>&1 || {
  echo "kern-sandbox: this image has no node on PATH; a JavaScript or TypeScript kernel needs node 18 or later in its image (kernel({ image }))" >&2
  exit 127
}
exec 3<&0 4>&1 0</dev/null
: | { exec 5<&0; : | exec node --min-semi-space-size=8 -e "$1" "$2" 6<&0 0</dev/null 1>/proc/self/fd/5 2>/proc/self/fd/6; }
