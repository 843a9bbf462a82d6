#!/bin/sh
# Runs one chaos test case (ctest entries chaos_eager, chaos_cooperative).
#
# librdkafka's mock cluster can abort the whole process on an assertion of its own
# (rdkafka_mock_cgrp.c: "Assertion `!member->resp' failed"): it readmits expired member ids and
# reuses generated ones, so two members can share an id (docs/DESIGN.md, "Chaos test"). That is a
# crash of the test broker, not a verdict on the clients, so such a run is reported and repeated
# with a new seed, at most twice. Any other failure (an invariant violated, a timeout, a crash
# elsewhere) fails at once.
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
  if [ "$attempt" -lt 3 ] && grep -q "rdkafka_mock.*Assertion" "$log"; then
    echo "run_chaos: attempt $attempt ended with an abort inside librdkafka's mock cluster (above); repeating with a new seed"
    attempt=$((attempt + 1))
    continue
  fi
  exit "$rc"
done
