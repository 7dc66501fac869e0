#!/usr/bin/env python3
"""Drives a program on a pseudo-terminal, the way a person at a keyboard would.

    pty_session.py RC STEP... -- COMMAND...

Each STEP is `expect:REGEX` (wait until everything printed so far matches REGEX,
for up to 60 s) or `send:TEXT` (type TEXT; `\\n` and `\\x03` escapes, so Ctrl-C
is `send:\\x03`). After the last step the program must exit with RC.

Waiting for the output instead of sleeping a fixed time makes the test independent
of how fast the machine is: a Ctrl-C meant for a running reply is only typed once
the reply is visibly running. Prints the transcript when a step fails.
"""
import os
import pty
import re
import select
import sys
import time

STEP_TIMEOUT_S = 60.0


def main() -> int:
    separator = sys.argv.index("--")
    expected_rc = int(sys.argv[1])
    steps = sys.argv[2:separator]
    command = sys.argv[separator + 1 :]

    pid, master = pty.fork()
    if pid == 0:
        os.execvp(command[0], command)

    transcript = bytearray()
    consumed = 0  # each expect searches only what follows the previous match

    def read_some(timeout: float) -> bool:
        """Appends what the program printed; False once it has closed the terminal."""
        ready, _, _ = select.select([master], [], [], timeout)
        if not ready:
            return True
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the program exited and the slave side is closed
            return False
        transcript.extend(chunk)
        return bool(chunk)

    def fail(message: str) -> int:
        text = transcript.decode("utf-8", "replace")
        print(f"FAIL: {message}\n---- transcript ({len(text)} characters, last 4000) ----")
        print(text[-4000:])
        try:
            os.kill(pid, 9)
        except ProcessLookupError:
            pass
        return 1

    for step in steps:
        kind, _, argument = step.partition(":")
        if kind == "send":
            os.write(master, argument.encode().decode("unicode_escape").encode("latin-1"))
        elif kind == "expect":
            pattern = re.compile(argument.encode(), re.DOTALL)
            deadline = time.monotonic() + STEP_TIMEOUT_S
            while not (match := pattern.search(transcript, consumed)):
                if time.monotonic() > deadline:
                    return fail(f"no match for {argument!r} within {STEP_TIMEOUT_S:.0f} s")
                if not read_some(0.1):
                    return fail(f"the program exited before printing {argument!r}")
            consumed = match.end()
        else:
            return fail(f"unknown step {step!r}")

    deadline = time.monotonic() + STEP_TIMEOUT_S
    while read_some(0.1):
        if time.monotonic() > deadline:
            return fail("the program did not exit")
    _, status = os.waitpid(pid, 0)
    rc = os.waitstatus_to_exitcode(status)
    rc = 128 - rc if rc < 0 else rc  # killed by a signal: the shell's 128 + signal
    if rc != expected_rc:
        return fail(f"exit code {rc}, expected {expected_rc}")
    print(transcript.decode("utf-8", "replace")[-2000:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
