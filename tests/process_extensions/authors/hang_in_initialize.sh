#!/usr/bin/env bash
# A process extension that never answers `initialize` (it reads and ignores every line), as an
# author's extension stuck at start-up does. It leaves two marks in $HANG_MARKS: one when it
# starts, and one saying whether the extension named $HANG_PEER had started while Roder still
# waited on this one (before it closed this one's stdin or stopped it): `together` (Roder started
# both before waiting for either), else `alone`. The second mark is kept up to date while it
# runs, each write whole (a file renamed into place), so stopping it at any moment (bubblewrap's
# namespace goes with SIGKILL) leaves the answer it had reached, never a half-written file.
me=${RODER_EXTENSION_NAME:?}
mark() {
  echo "$1" > "$HANG_MARKS/.$me.ended" && mv -f "$HANG_MARKS/.$me.ended" "$HANG_MARKS/$me.ended"
}
trap 'exit 0' TERM
mark alone
echo started > "$HANG_MARKS/$me.started"
seen=alone
while :; do
  if [[ $seen == alone && -e $HANG_MARKS/$HANG_PEER.started ]]; then
    seen=together
    mark together
  fi
  IFS= read -r -t 0.2 _line
  status=$?
  ((status > 128)) && continue # no line yet: look for the peer again
  ((status == 0)) || break     # stdin closed: Roder gave up on this one
done
