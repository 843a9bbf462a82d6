#!/bin/sh
# Runs one chaos test case (ctest entries chaos_eager, chaos_cooperative).
#
# Two known librdkafka bugs (Debian 12 ships librdkafka 2.0.2) can abort a run on an assertion
# inside librdkafka, not in kgroup:
#   - the mock cluster (rdkafka_mock_cgrp.c: "Assertion `!member->resp' failed"): it readmits
#     expired member ids and reuses generated ones, so two members can share an id
#     (docs/DESIGN.md, "Chaos test");
#   - a librdkafka member closed before its first cooperative-sticky assignment
#     (rdkafka_sticky_assignor.c: rd_kafka_sticky_assignor_state_destroy: "Assertion
#     `assignor_state' failed", librdkafka issue #4312, fixed in 2.3.0).
# Such a run is reported and repeated with a new seed, at most four times (the second one hit
# about one cooperative run in three here). Any other failure (an
# invariant violated, a timeout, a crash elsewhere) fails at once.
#
# Usage: run_chaos.sh BINARY TEST-CASE-NAME
set -u
bin=$1
name=$2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
attempt=1
while :; do
  "$bin" "$name" >"$log" 2>&1
  rc=$?
  cat "$log"
  [ "$rc" -eq 0 ] && exit 0
  if [ "$attempt" -lt 5 ] && grep -qE "rdkafka_mock[a-z_]*\.c:[0-9]+: .*Assertion|rd_kafka_sticky_assignor_state_destroy: Assertion" "$log"; then
    echo "run_chaos: attempt $attempt ended with a known librdkafka abort (above); repeating with a new seed"
    attempt=$((attempt + 1))
    continue
  fi
  exit "$rc"
done
