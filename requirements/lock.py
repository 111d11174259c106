"""`make lock`: rewrite both constraint files from fresh virtualenvs (docs/deploying.md#installing).

    python3 requirements/lock.py

1. A virtualenv of `runtime.txt` alone, its constraint line ignored: its
   `pip freeze` is `runtime-constraints.txt`.
2. A virtualenv of `runtime.txt` and `dev.txt`, held to the new runtime pins:
   what it adds is `dev-constraints.txt`. So a package both groups need is
   pinned once, at the version production runs, and the two files never
   disagree.

Each file keeps its comment header. Needs the package index; stdlib only.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _name(line: str) -> str:
    return re.split(r"[=<>!~\[; ]", line, maxsplit=1)[0].lower().replace("_", "-")


def _freeze(venv: Path, requirement_files: list[Path], constraints: Path | None) -> list[str]:
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    pip = [str(venv / "bin" / "python"), "-m", "pip", "--disable-pip-version-check"]
    command = [*pip, "install", "--quiet"]
    for path in requirement_files:
        command += ["-r", str(path)]
    if constraints is not None:
        command += ["-c", str(constraints)]
    subprocess.run(command, check=True)
    frozen = subprocess.run([*pip, "freeze"], check=True, capture_output=True, text=True).stdout
    return [line for line in frozen.splitlines() if line.strip()]


def _without_constraints(source: Path, target: Path) -> Path:
    lines = source.read_text().splitlines()
    target.write_text("\n".join(line for line in lines if not line.startswith(("-c", "-r"))) + "\n")
    return target


def _write(path: Path, pins: list[str]) -> None:
    header = [line for line in path.read_text().splitlines() if line.startswith("#")]
    path.write_text("\n".join([*header, *pins]) + "\n")


def main() -> int:
    work = Path(tempfile.mkdtemp(prefix="silvia-lock-"))
    try:
        runtime = _freeze(work / "runtime", [_without_constraints(HERE / "runtime.txt", work / "runtime.txt")], None)
        _write(HERE / "runtime-constraints.txt", runtime)
        dev_only = _without_constraints(HERE / "dev.txt", work / "dev.txt")
        everything = _freeze(work / "dev", [work / "runtime.txt", dev_only], HERE / "runtime-constraints.txt")
        pinned = {_name(line) for line in runtime}
        _write(HERE / "dev-constraints.txt", [line for line in everything if _name(line) not in pinned])
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
