"""``python -m suite dashboard [PATHS...]``: serve the dashboard on localhost.

The paths go to the app in an environment variable (a JSON list), not on a
command line the app would parse or in a URL, so the app reads exactly these
files and folders and nothing a visitor types can point it elsewhere.  The
server is dashboard/serve.py, Streamlit's own command line after the runs are
loaded, so the first visitor does not wait for the load.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

from dashboard.data import PATHS_ENV, default_paths

APP = Path(__file__).resolve().parent / "app.py"
SERVE = Path(__file__).resolve().parent / "serve.py"  # streamlit's CLI, after loading the runs


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="results files, folders or globs (default: the repository's runs/ and results/)")
    parser.add_argument("--port", type=int, default=8501, help="port to serve on (default 8501)")
    parser.add_argument("--address", default="127.0.0.1",
                        help="address to bind (default 127.0.0.1: this machine only)")
    parser.add_argument("--headless", action="store_true", help="do not open a browser")


def is_glob(path: str) -> bool:
    """A pattern to expand, not a path: it has glob characters and no such file or folder
    exists (x[1].parquet that exists is that file, as suite.store reads it)."""
    return any(c in path for c in "*?[") and not Path(path).expanduser().exists()


def command(args: argparse.Namespace) -> tuple[list[str], dict[str, str]]:
    """The streamlit command line and environment for these arguments."""
    paths = [p if is_glob(p) else str(Path(p).expanduser().resolve()) for p in (args.paths or default_paths())]
    cmd = [sys.executable, str(SERVE), "run", str(APP),
           "--server.port", str(args.port), "--server.address", args.address,
           "--server.headless", "true" if args.headless else "false",
           "--server.runOnSave", "false", "--server.fileWatcherType", "none",
           "--browser.gatherUsageStats", "false"]
    env = dict(os.environ, **{PATHS_ENV: json.dumps(paths)})
    return cmd, env


def main(args: argparse.Namespace) -> int:
    if not 0 < args.port < 65536:  # else streamlit's server dies on bind() with a traceback
        from suite.args import UsageError

        raise UsageError(f"--port {args.port}: expected a TCP port from 1 to 65535")
    missing = [m for m in ("streamlit", "plotly") if importlib.util.find_spec(m) is None]
    if missing:
        print(f"error: the dashboard needs {' and '.join(missing)}: run `scripts/setup.sh dev` "
              "(or pip install -e '.[dashboard]')", file=sys.stderr)
        return 2
    cmd, env = command(args)
    for p in json.loads(env[PATHS_ENV]):
        if not is_glob(p) and not Path(p).exists():
            print(f"warning: {p} does not exist; the dashboard will say so", file=sys.stderr)
    print(f"kernel-suite dashboard on http://{args.address}:{args.port}", file=sys.stderr)
    try:
        return subprocess.call(cmd, env=env)
    except KeyboardInterrupt:
        return 0
