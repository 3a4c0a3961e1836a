"""``lakelog metastore sync ARGS`` twice in one process (one Spark JVM), the second run once a line comes on
stdin: the test changes the cluster in between.

    python metastore_sync_app.py -b URL --data-dir DIR

Prints each run's output as a JSON line ``{"exit_code": int, "output": str}``.
"""

from __future__ import annotations

import json
import sys


def main(args: list[str]) -> int:
    from typer.testing import CliRunner

    from lakelog.cli.main import app

    runner = CliRunner()
    for run in range(2):
        if run:
            sys.stdin.readline()
        result = runner.invoke(app, ["metastore", "sync", *args])
        print(json.dumps({"exit_code": result.exit_code, "output": result.output
                          + ("" if result.exception is None or result.exit_code == 0 else repr(result.exception))}),
              flush=True)
        if result.exit_code != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
