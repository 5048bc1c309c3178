"""dashboard/launch.py: the streamlit command line, and paths passed only by environment."""
import argparse
import json
import sys

import pandas as pd
import pytest

pytest.importorskip("streamlit", reason="the dashboard needs streamlit (scripts/setup.sh dev)")

from dashboard import data, launch  # noqa: E402
from suite import cli  # noqa: E402


def args(*argv):
    p = argparse.ArgumentParser()
    launch.configure(p)
    return p.parse_args(list(argv))


def test_command_passes_paths_in_the_environment(tmp_path):
    cmd, env = launch.command(args(str(tmp_path), "results/*.parquet", "--port", "9999", "--headless"))
    assert cmd[:3] == [sys.executable, str(launch.SERVE), "run"] and cmd[3] == str(launch.APP)
    assert cmd[cmd.index("--server.port") + 1] == "9999"
    assert cmd[cmd.index("--server.address") + 1] == "127.0.0.1"
    assert cmd[cmd.index("--server.headless") + 1] == "true"
    assert str(tmp_path) not in " ".join(cmd)
    assert json.loads(env[data.PATHS_ENV]) == [str(tmp_path.resolve()), "results/*.parquet"]


def test_an_existing_path_with_glob_characters_is_taken_literally(tmp_path, monkeypatch):
    """x[1].parquet names a file when one exists: made absolute like any path (the server
    does not run here), and only a path that exists nowhere is passed on as a glob."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x[1].parquet").write_bytes(b"")
    (tmp_path / "runs[old]").mkdir()
    _, env = launch.command(args("x[1].parquet", "runs[old]", "r[0-9].parquet"))
    assert json.loads(env[data.PATHS_ENV]) == [str((tmp_path / "x[1].parquet").resolve()),
                                               str((tmp_path / "runs[old]").resolve()), "r[0-9].parquet"]


def test_default_paths_are_the_users_runs_and_the_reference_results(tmp_path, monkeypatch):
    cmd, env = launch.command(args())
    assert json.loads(env[data.PATHS_ENV]) == list(data.default_paths())
    assert cmd[cmd.index("--server.headless") + 1] == "false"
    # runs/ (a user's own, ignored by git) and results/ (the reference runs), those that exist
    monkeypatch.setattr(data, "DEFAULT_PATHS", (str(tmp_path / "runs"), str(tmp_path / "results")))
    assert data.default_paths() == (str(tmp_path / "results"),)
    (tmp_path / "runs").mkdir()
    (tmp_path / "results").mkdir()
    _, env = launch.command(args())
    assert json.loads(env[data.PATHS_ENV]) == [str(tmp_path / "runs"), str(tmp_path / "results")]


def test_the_default_paths_are_the_repositorys_runs_and_results():
    assert [p.rsplit("/", 1)[1] for p in data.DEFAULT_PATHS] == ["runs", "results"]


def test_missing_packages_exit_2(monkeypatch, capsys):
    monkeypatch.setattr(launch.importlib.util, "find_spec", lambda name: None)
    assert launch.main(args()) == 2
    assert "scripts/setup.sh dev" in capsys.readouterr().err


def test_cli_wires_the_verb():
    parsed = cli.build_parser("dashboard").parse_args(["dashboard", "a", "b", "--port", "1234"])
    assert parsed.paths == ["a", "b"] and parsed.port == 1234 and parsed.headless is False


def test_the_server_loads_the_runs_before_it_answers(monkeypatch, tmp_path):
    import fixtures_dashboard as fx
    from dashboard import serve

    path = fx.write_run(fx.make_run("h200", "aaaaaaa", "2025-06-01T10:00:00Z"), tmp_path / "results")
    monkeypatch.setenv(data.PATHS_ENV, json.dumps([str(path)]))
    serve.warm()
    warm = data.load()
    monkeypatch.setattr(data, "build", lambda paths: pytest.fail("loaded again"))
    assert data.load() is warm and len(warm.frame) == len(pd.read_parquet(path))
    # and the Overview's tables under no filter are ready: its first page computes none
    from dashboard import analysis, ui

    ready = dict(warm._shared)
    ctx = ui.context_for(warm, analysis.Filters())
    best = ctx.of(analysis.best_table)
    dtypes, gpus = ctx.of(analysis.sol_choices)
    assert ctx.of(analysis.sol_runs, gpus[0]) == []  # one run: no run to choose
    sol, _ = ctx.of(analysis.sol_matrix, dtypes[0], gpus[0], None)
    assert len(best) and not sol.empty
    # the rows and four tables, none added or computed again
    assert len(ready) == 5 and warm._shared.keys() == ready.keys()
    assert all(warm._shared[k] is v for k, v in ready.items())
