"""Print the events of the next N days from .ics files (a deliberately small parser: DTSTART and SUMMARY)."""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path


def events(path: Path) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    start, summary = "", ""
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("DTSTART"):
            start = line.split(":", 1)[1]
        elif line.startswith("SUMMARY:"):
            summary = line.split(":", 1)[1]
        elif line == "END:VEVENT":
            found.append((start, summary))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("files", nargs="+", type=Path)
    parser.add_argument("--days", type=int, default=1)
    args = parser.parse_args()
    horizon = (dt.date.today() + dt.timedelta(days=args.days)).strftime("%Y%m%d")
    for start, summary in sorted(e for f in args.files for e in events(f)):
        if start[:8] <= horizon:
            print(start, summary)


if __name__ == "__main__":
    main()
