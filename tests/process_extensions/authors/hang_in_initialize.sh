#!/usr/bin/env bash
# A process extension that never answers `initialize` (it reads and ignores every line), as an
# author's extension stuck at start-up does. It leaves two marks in $HANG_MARKS: one when it
# starts, and one when Roder gives up on it (closes its stdin, or stops it): `together` if the
# extension named $HANG_PEER had started by then (Roder started both before waiting for
# either), else `alone`.
me=${RODER_EXTENSION_NAME:?}
ended() {
  if [[ -e $HANG_MARKS/$HANG_PEER.started ]]; then echo together; else echo alone; fi > "$HANG_MARKS/$me.ended"
  exit 0
}
trap ended TERM
echo started > "$HANG_MARKS/$me.started"
while IFS= read -r _line; do :; done
ended
