#!/bin/sh
# expect.sh RC REGEX MAX_LINES COMMAND...
# Runs COMMAND and checks its exit code (RC), that its output (stdout and stderr
# together) matches the extended regular expression REGEX, and, unless MAX_LINES is
# 0, that it printed at most MAX_LINES lines. CTest's own pass regex ignores the exit
# code, hence this wrapper.
expected_rc=$1 regex=$2 max_lines=$3
shift 3
output=$("$@" 2>&1)
rc=$?
status=0
if [ "$rc" != "$expected_rc" ]; then
  echo "FAIL: exit code $rc, expected $expected_rc"
  status=1
fi
# -z reads the whole output as one record: REGEX may span lines, ^ and $ anchor
# the start and end of everything printed.
if ! printf '%s' "$output" | tr -d '\r' | grep -Ezq -- "$regex"; then
  echo "FAIL: the output does not match: $regex"
  status=1
fi
lines=$(printf '%s\n' "$output" | wc -l)
if [ "$max_lines" != 0 ] && [ "$lines" -gt "$max_lines" ]; then
  echo "FAIL: $lines lines of output, expected at most $max_lines"
  status=1
fi
echo "---- output ($lines lines) ----"
printf '%s\n' "$output" | head -c 4000
exit $status
