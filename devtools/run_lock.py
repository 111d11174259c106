"""`python devtools/run_lock.py LOCK MESSAGE [COMMAND...]`: one `make run` per var/ (docs/running.md).

Takes an exclusive flock on the file LOCK without waiting; when another
process holds it, prints MESSAGE and exits 1. With a COMMAND, becomes it
(exec) with the lock's descriptor inherited, so the lock lasts as long as
the command (and what it starts) runs, however it ends; without one, only
checks that the lock is free.
"""

from __future__ import annotations

import fcntl
import os
import sys


def main(argv: list[str]) -> None:
    lock_path, message, command = argv[1], argv[2], argv[3:]
    os.makedirs(os.path.dirname(os.path.abspath(lock_path)), exist_ok=True)
    lock = open(lock_path, "a")  # noqa: SIM115 -- held on purpose, across the exec below
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        sys.exit(message)
    if command:
        os.set_inheritable(lock.fileno(), True)
        os.execv(command[0], command)  # noqa: S606 -- the make recipe names the program


if __name__ == "__main__":
    main(sys.argv)
