"""Bad input gives one line naming the valid choices and exit code 2."""
import pytest

from tests.helpers import suite, suite_here


@pytest.mark.parametrize("args,needle", [
    (["run", "--device", "cpu", "--preset", "cpu", "--workloads", "gelux"], "unknown workload 'gelux'; choose from attention, gelu"),
    (["run", "--device", "cpu", "--preset", "cpu", "--dtypes", "float8"], "unknown dtype 'float8'; choose from float32, float16, bfloat16"),
    (["run", "--device", "cpu", "--preset", "quick"], "use --preset cpu"),
    (["run", "--device", "cpu", "--preset", "cpu", "--impls", "nope"], "unknown implementation 'nope'"),
    (["run", "--device", "cpu", "--preset", "cpu", "--timer", "graph"], "on the CPU use --timer wall"),
    (["run", "--device", "cpu", "--preset", "cpu", "--shard", "3/2"], "expected K/N"),
    (["run", "--device", "cuda"], "no CUDA GPU is visible"),
    (["ceilings", "--device", "cuda"], "no CUDA GPU is visible"),
    (["run", "--device", "cpu", "--preset", "cpu", "--out", "/"], "--out /: a folder; name the file to write"),
    (["export", "--format", "bencher", "--out", "/", "results/"], "--out /: a folder"),
    (["import-pytest-benchmark", "--out", "/proc/no-such/x.parquet", "x.json"], "cannot make its folder"),
    (["run", "--device", "cpu", "--preset", "cpu", "--out", "/proc/no-such/run.parquet"], "cannot make its folder"),
    (["list", "--device", "cuda"], "no CUDA GPU is visible"),
    (["list", "--device", "cpu", "--plugin", "/"], "--plugin /: a folder, not a file; name a .py file"),
    (["import-pytest-benchmark", "/"], "/: a folder, not a file; name the pytest-benchmark JSON files in it"),
    (["frobnicate"], "unknown verb 'frobnicate'"),
    (["--device", "cpu", "run", "--preset", "cpu"], "put the verb first: python -m suite run --device cpu --preset cpu"),
    (["--device", "cpu"], "put the verb first: python -m suite VERB --device cpu; choose from run, list"),
    (["show", "/nonexistent/x.parquet"], "no readable results"),
    (["run", "--device", "cpu", "--workloads", "gelu", "--shape", "N=5", "--timeout", "0"], "--timeout 0: expected a positive number of seconds"),
    (["run", "--device", "cpu", "--workloads", "gelu", "--shape", "N=5", "--timeout", "nan"], "--timeout nan: expected a positive number"),
    (["run", "--device", "cpu", "--workloads", "gelu", "--impls", "torch", "--dtypes", "float32", "--shape", "N=5",
      "--seed", str(2**63)], f"--seed {2**63}: expected a whole number from 0 to {2**63 - 1}"),
    (["run", "--device", "cpu", "--workloads", "gelu", "--impls", "torch", "--dtypes", "float32", "--shape", "N=5",
      "--seed", "-1"], "--seed -1: expected a whole number from 0"),
    (["run", "--device", "cpu", "--workloads", "gelu", "--impls", "torch", "--dtypes", "float32", "--shape", "N=5",
      "--samples", "3,3", "--profile-dir", "ncu-out"], "--profile-dir ncu-out: only --profile ncu writes there"),
    (["compare", "--alpha", "2", "a.parquet", "b.parquet"], "--alpha 2: expected a significance level between 0 and 1"),
    (["compare", "--alpha", "nan", "a.parquet", "b.parquet"], "--alpha nan: expected a significance level"),
    (["compare", "--floor-us", "-3", "a.parquet", "b.parquet"], "--floor-us -3: expected 0 or more microseconds"),
    (["compare", "--base", "abc1234", "a.parquet", "b.parquet"], "--base abc1234 names the group that --by compares"),
])
def test_bad_input_is_one_line_and_exit_2(args, needle):
    r = suite_here(*args)
    assert r.returncode == 2, r.stderr
    assert needle in r.stderr
    assert "Traceback" not in r.stderr
    assert len([ln for ln in r.stderr.splitlines() if ln.startswith("error:")]) == 1


def test_a_usage_error_is_exit_2_of_the_process():
    """The tests above call the CLI in-process; the process's own exit code and stderr."""
    r = suite("frobnicate", timeout=120)
    assert r.returncode == 2 and r.stderr.startswith("error: unknown verb 'frobnicate'"), r.stderr


@pytest.mark.parametrize("args,line", [
    (["run", "--out"], "error: argument --out: expected one argument (see python -m suite run --help)"),
    (["run", "--seed", "x"], "error: argument --seed: invalid int value: 'x' (see python -m suite run --help)"),
    (["show"], "error: the following arguments are required: paths (see python -m suite show --help)"),
    (["compare", "--alpha"], "error: argument --alpha: expected one argument (see python -m suite compare --help)"),
    # ab's own options after the refs are read by a parser of their own
    (["ab", "A", "B", "--rounds", "x"], "error: argument --rounds: invalid int value: 'x' "
                                        "(see python -m suite ab --help)"),
])
def test_argparse_refusals_are_one_line_naming_the_help(args, line):
    r = suite_here(*args)
    assert r.returncode == 2 and r.stderr == line + "\n", r.stderr


def test_every_verb_refuses_an_unknown_option_in_one_line():
    from suite.cli import VERBS

    for verb in VERBS:
        r = suite_here(verb, "--no-such-option", "x")
        assert r.returncode == 2 and r.stderr.startswith("error: "), (verb, r.stderr)
        assert len(r.stderr.splitlines()) == 1 and f"(see python -m suite {verb} --help)" in r.stderr, (verb, r.stderr)


def test_l2_flush_takes_the_row_l2_names_only():
    r = suite_here("run", "--device", "cpu", "--preset", "cpu", "--l2-flush", "clean")
    assert r.returncode == 2
    assert "--l2-flush: invalid choice: 'clean' (choose from 'cold-clean', 'cold-flush')" in r.stderr


@pytest.mark.parametrize("args,needle", [
    (["--samples", "20,10"], "--samples 20,10 --budget-ms 150: max_samples must be a whole number of at least "
                             "min_samples (20), not 10"),
    (["--samples", "0,10"], "min_samples must be a whole number of at least 1, not 0"),
    (["--samples", "ten"], "--samples 'ten': expected MIN,MAX"),
    (["--budget-ms", "0"], "budget_ms must be a positive number of milliseconds"),
    (["--settle-ms", "-5"], "--settle-ms -5: settle_ms must be a number of milliseconds, 0 or more"),
])
def test_a_bad_timing_protocol_is_one_line_and_exit_2(args, needle):
    r = suite_here("run", "--device", "cpu", "--preset", "cpu", *args)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("error: ") and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert needle in r.stderr


def test_a_cold_flush_run_carries_its_protocol_to_the_worker(tmp_path):
    """On the CPU the wall timer stores l2=n/a whatever --l2-flush says; the sample
    limits of the same protocol show that it reached the worker."""
    from suite import store

    out = tmp_path / "run.parquet"
    r = suite("run", "--device", "cpu", "--preset", "cpu", "--workloads", "gelu", "--impls", "eager",
              "--dtypes", "float32", "--l2-flush", "cold-flush", "--samples", "3,3", "--out", str(out),
              "--no-progress", "--reuse-ceilings", timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    df = store.read_file(out)
    assert len(df) and (df["status"] == "ok").all()
    assert (df["l2"] == "n/a").all() and (df["timer"] == "wall").all()
    assert (df["n_samples"] == 3).all()


def test_list_shows_the_matrix_with_reasons():
    r = suite_here("list", "--device", "cpu")
    assert r.returncode == 0, r.stderr
    for word in ("gelu", "residual_layernorm_gelu", "softmax", "gemm", "attention",
                 "compile:dynamic", "torch:flash", "needs a CUDA GPU"):
        assert word in r.stdout


def test_help_explains_the_verbs_and_run_options():
    r = suite("--help")
    assert r.returncode == 0 and "run" in r.stdout and "compare" in r.stdout
    r = suite_here("run", "--help")
    assert r.returncode == 0
    for word in ("--preset", "--resume", "--shard", "--timer", "--l2-flush", "cold-clean", "float64",
                 "--shape K=V", "--shapes FILE", "llm"):
        assert word in r.stdout


def test_every_verb_has_a_help_that_prints():
    """argparse formats each help string with %: a bare one in any option's help crashes --help."""
    from suite.cli import build_parser

    verbs = next(a for a in build_parser()._actions if a.dest == "verb").choices
    assert {"run", "compare", "ab", "report", "dashboard"} <= set(verbs)
    for verb in verbs:
        r = suite_here(verb, "--help")
        assert r.returncode == 0 and r.stdout.startswith("usage:") and not r.stderr, (verb, r.stderr[-300:])


def test_show_rows_lists_each_row_with_its_clock_and_filters(tmp_path):
    from suite import store

    base = {"schema_version": store.SCHEMA_VERSION, "run_id": "r1", "timestamp": "2026-11-30T00:00:00Z",
            "workload": "gemm", "dtype": "bfloat16", "shape": "M=4096,N=4096,K=4096", "shape_M": 4096,
            "shape_N": 4096, "shape_K": 4096, "timer": "events", "l2": "cold-flush", "flops": 2 * 4096 ** 3,
            "min_bytes": 3 * 2 * 4096 ** 2, "bound": "compute", "size": 4096 ** 2, "gpu_name": "NVIDIA H200",
            "commit": "abc1234", "device": "cuda"}
    rows = [dict(base, impl="torch", backend="torch", status="ok", ms_median=0.180, tflops=763.0, gbps=559.0,
                 sol=0.96, sm_clock_mhz=1980.0, clock_limits=""),
            dict(base, impl="cuda", backend="cuda", status="ok", ms_median=0.270, tflops=509.0, gbps=373.0,
                 sol=0.64, sm_clock_mhz=1755.4, power_w=687.6, clock_limits="power cap"),
            dict(base, impl="cuda:naive", backend="cuda", status="error", error="illegal memory access"),
            dict(base, impl="triton", backend="triton", status="ok", ms_median=0.200, tflops=687.0, gbps=503.0,
                 sol=0.86)]
    path = store.write_atomic(store.to_frame(rows), tmp_path / "run.parquet")
    r = suite("show", str(path), "--rows", "--impls", "cuda,torch,cuda:naive", timeout=120)
    assert r.returncode == 0, r.stderr
    table = r.stdout.split("rows by status")[1]  # the per-row table follows the summary
    lines = [ln for ln in table.splitlines() if "M=4096" in ln and "events" in ln]
    cuda = next(ln for ln in lines if " cuda " in ln)
    assert "1755" in cuda and "688" in cuda and "power cap" in cuda and "0.667" in cuda  # 0.180 / 0.270 x torch
    assert "1980" in next(ln for ln in lines if " torch " in ln)
    assert "error" in next(ln for ln in lines if "cuda:naive" in ln)
    assert not [ln for ln in lines if "triton" in ln]  # filtered out
    r = suite("show", str(path), timeout=120)
    assert r.returncode == 0 and "1755" not in r.stdout  # the per-row table only with --rows
    r = suite("show", str(path), "--rows", "--workloads", "gemmm", timeout=120)
    assert r.returncode == 2 and "unknown workload 'gemmm'; choose from gemm" in r.stderr


def _run_rows(run_id, gpu, stamp, workload="gelu", **kw):
    from suite import store

    base = {"schema_version": store.SCHEMA_VERSION, "run_id": run_id, "timestamp": stamp, "gpu_name": gpu,
            "workload": workload, "impl": "torch", "backend": "torch", "dtype": "float32", "timer": "events",
            "l2": "cold-clean", "status": "ok", "commit": "abc1234", "device": "cuda", "bound": "memory"}
    return [dict(base, shape=f"N={n}", size=n, ms_median=n / 1e6, gbps=800.0, sol=0.5, **kw) for n in (1024, 4096)]


def test_show_newest_run_of_each_gpu_and_one_line_when_no_row_matches(tmp_path):
    from suite import store

    runs = {"h200/old.parquet": _run_rows("old", "NVIDIA H200", "2026-01-01T00:00:00Z", "gemm"),
            "h200/new.parquet": _run_rows("new", "NVIDIA H200", "2026-02-01T00:00:00Z"),
            "h100/only.parquet": _run_rows("only", "NVIDIA H100", "2025-12-01T00:00:00Z")}
    for name, rows in runs.items():
        store.write_atomic(store.to_frame(rows), tmp_path / name)
    r = suite("show", str(tmp_path), "--newest", timeout=120)
    assert r.returncode == 0, r.stderr
    shown = [ln.split(":")[0] for ln in r.stdout.splitlines() if ln.startswith("run ")]
    assert shown == ["run only", "run new"]
    r = suite("show", str(tmp_path / "h200"), "--newest", timeout=120)
    assert [ln.split(":")[0] for ln in r.stdout.splitlines() if ln.startswith("run ")] == ["run new"]
    # --rows narrowed to gemm: the one run that has gemm rows, and a count of the others
    r = suite("show", str(tmp_path), "--rows", "--workloads", "gemm", timeout=120)
    assert r.returncode == 0, r.stderr
    assert [ln.split(":")[0] for ln in r.stdout.splitlines() if ln.startswith("run ")] == ["run old"]
    assert "2 runs with no matching row not shown" in r.stdout and "no rows match" not in r.stdout
    r = suite("show", str(tmp_path), "--rows", "--workloads", "gemm", "--impls", "torch", "--dtypes",
              "float16", timeout=120)
    assert r.returncode == 2 and "unknown dtype 'float16'" in r.stderr  # no file has it
    r = suite("show", str(tmp_path / "h200" / "new.parquet"), str(tmp_path / "h100"), "--rows",
              "--workloads", "gelu", "--impls", "torch", timeout=120)
    assert r.stdout.count("run ") == 2
    r = suite("show", str(tmp_path), "--rows", "--workloads", "gemm", "--newest", timeout=120)
    assert r.returncode == 0 and r.stdout.count("no rows match") == 1 and "run " not in r.stdout


def test_show_filters_narrow_the_summary_without_rows_too(tmp_path):
    from suite import store

    rows = _run_rows("r", "NVIDIA H200", "2026-01-01T00:00:00Z", "gemm")
    rows += _run_rows("r", "NVIDIA H200", "2026-01-01T00:00:00Z", "gelu")
    path = store.write_atomic(store.to_frame(rows), tmp_path / "run.parquet")
    r = suite_here("show", str(path), "--workloads", "gemm")
    assert r.returncode == 0, r.stderr[-500:]
    assert " gemm " in r.stdout and " gelu " not in r.stdout, r.stdout
    assert "2 of 4 rows" in r.stdout and "rows by status: ok 2" in r.stdout, r.stdout
    r = suite_here("show", str(path), "--dtypes", "float32", "--impls", "eager")
    assert r.returncode == 2 and "unknown implementation 'eager'; choose from torch" in r.stderr, r.stderr


def test_summary_of_unavailable_rows_and_of_cpu_rows():
    """Rows as the sweep builds them for an unavailable implementation carry no timing columns;
    a CPU row (a smoke run) shows no SOL and is never a suspect."""
    import io

    from suite.summary import print_summary

    unavailable = [{"workload": "softmax", "impl": "triton", "dtype": "float32", "shape": "M=5,N=3",
                    "size": 15, "timer": "wall", "status": "unavailable", "device": "cpu",
                    "error": "Triton on the CPU needs TRITON_INTERPRET=1"}]
    out = io.StringIO()
    print_summary(unavailable, file=out)
    assert "none correct" in out.getvalue() and "unavailable 1" in out.getvalue()
    cpu = [dict(r, device="cpu", l2="cold-clean", timer="wall", sol=6.28, workload="gemm", bound="compute",
                tflops=0.0123) for r in _run_rows("c", "CPU x86_64", "2026-01-01T00:00:00Z")]
    out = io.StringIO()
    print_summary(cpu, file=out)
    text = out.getvalue()
    assert "CPU run: a smoke run, not scored on a roofline" in text
    assert "6.28" not in text and "suspect" not in text and "0.012" in text


def test_show_and_report_keep_two_digits_of_a_small_rate():
    """1.42 GB/s printed as '1' (or 0.0123 TFLOP/s as '0.0') reads as a different figure: a
    rate keeps at least two significant digits, in show's summary, its rows and report alike."""
    import io

    from suite import store
    from suite.report import render
    from suite.summary import print_rows, print_summary

    rows = [dict(r, gbps=1.42, tflops=0.0123) for r in _run_rows("r", "NVIDIA H200", "2026-01-01T00:00:00Z")]
    out = io.StringIO()
    print_summary(rows, file=out)
    best = next(ln for ln in out.getvalue().splitlines() if "N=4096" in ln)
    assert " 1.4 " in best and " 0.012 " in best, best
    out = io.StringIO()
    print_rows(store.to_frame(rows), file=out)
    assert all(" 1.4 " in ln and " 0.012 " in ln for ln in out.getvalue().splitlines() if "N=" in ln), out.getvalue()
    assert "| 1.4 (0.50) |" in render(store.to_frame(rows), "t")


def _hostile_runs(tmp_path):
    """Two small runs whose stored text holds rich markup and Markdown: an error message,
    an implementation name and a commit."""
    import pandas as pd

    from suite import store

    base = {"schema_version": store.SCHEMA_VERSION, "timestamp": "2026-11-30T00:00:00Z", "workload": "softmax",
            "dtype": "float32", "shape": "M=64,N=100", "shape_M": 64, "shape_N": 100, "timer": "events",
            "l2": "cold-clean", "flops": 5 * 6400, "min_bytes": 2 * 4 * 6400, "bound": "memory", "size": 6400,
            "gpu_name": "NVIDIA H200", "device": "cuda", "backend": "triton"}
    link = "[link=http://evil.example]click[/link] [/] [bold red]x[/]"
    name = "triton:[x](http://evil.example)[/]"
    rows = [dict(base, impl=name, status="ok", ms_median=0.010, ms_p20=0.0099, ms_p80=0.0101, gbps=5.0, sol=0.5,
                 samples_ms=[0.0099, 0.010, 0.0101] * 4),
            dict(base, impl="torch", backend="torch", status="error", error="boom " + link, check="shape")]
    paths = []
    for run, commit in (("r1", "abc1234"), ("r2", "![i](http://evil.example/beacon.png)")):
        path = tmp_path / f"{run}.parquet"
        store.write_atomic(store.to_frame([dict(r, run_id=run, commit=commit) for r in rows]), path)
        paths.append(str(path))
    return paths, link, name


def test_stored_text_prints_as_itself(tmp_path):
    """show, show --rows and compare print a Parquet file's markup literally (rich would raise on
    '[/]' and print '[link=...]' as a hyperlink), and compare's Markdown escapes it, so a pull
    request comment shows no link, image or HTML from a file."""
    (a, b), link, name = _hostile_runs(tmp_path)
    r = suite_here("show", a)
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-500:]
    assert link in r.stdout and name in r.stdout
    r = suite_here("show", "--rows", a)
    assert r.returncode == 0 and name in r.stdout and "[link=http://evil.example]click" in r.stdout, r.stderr[-500:]
    r = suite_here("compare", a, b, "--gate", "all")
    assert r.returncode in (0, 1) and name in r.stdout and "Traceback" not in r.stderr, r.stderr[-500:]
    assert "![i](ht" in r.stdout  # the candidate's commit (its first 7 characters), as they are
    r = suite_here("compare", a, b, "--gate", "all", "--format", "markdown")
    assert r.returncode in (0, 1), r.stderr[-500:]
    assert "](http" not in r.stdout.replace("\\](http", ""), r.stdout  # every link and image escaped
    assert "triton:\\[x\\](http://evil.example)\\[/\\]" in r.stdout and "\\!\\[i\\](ht" in r.stdout


def test_plugin_text_prints_as_itself(tmp_path):
    plugin = tmp_path / "hostile_plugin.py"
    plugin.write_text(
        "from suite.workload import register\n"
        "@register('softmax', 'triton:[red]mine[/]', description='[link=http://evil.example]docs[/link] [/]')\n"
        "def mine(x):\n"
        "    return x.softmax(-1)\n")
    r = suite_here("list", "--device", "cpu", "--plugin", str(plugin))
    assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr[-500:]
    assert "triton:[red]mine[/]" in r.stdout and "[link=http://evil.example]docs" in r.stdout, r.stdout[-2000:]


def test_show_a_run_copied_into_two_folders(tmp_path):
    """A run file kept in two places (runs/ and results/, say) is two files of one run_id:
    show prints each file as it is, and --rows finds one torch time per case, not two."""
    from suite import store

    rows = _run_rows("same", "NVIDIA H200", "2026-01-01T00:00:00Z")
    rows += [dict(r, impl="triton", backend="triton", ms_median=r["ms_median"] / 2) for r in rows]
    for folder in ("a", "b"):
        store.write_atomic(store.to_frame(rows), tmp_path / folder / "run.parquet")
    r = suite_here("show", str(tmp_path), "--rows")
    assert r.returncode == 0, r.stderr[-2000:]
    heads = [ln for ln in r.stdout.splitlines() if ln.startswith("run same:")]
    assert len(heads) == 2 and all("4 rows" in ln for ln in heads), heads
    triton = [ln for ln in r.stdout.splitlines() if " triton " in ln and " ok " in ln and "N=4096" in ln]
    assert len(triton) == 2 and all("2.000" in ln for ln in triton), triton


def test_a_name_given_twice_in_a_list_runs_once():
    """--workloads gelu,gelu or --timer wall,wall would otherwise store each case twice under one
    row key, which resume, compare and show --rows take to be one measurement."""
    from suite import cli
    from suite.runner import make_plan
    from suite.workload import discover

    reg = discover()

    def plan(*argv):
        return make_plan(cli.build_parser("run").parse_args(["run", "--device", "cpu", "--preset", "cpu", *argv]), reg)

    once = plan("--workloads", "gelu", "--impls", "torch", "--dtypes", "float32", "--timer", "wall")
    twice = plan("--workloads", "gelu,gelu", "--impls", "torch,torch", "--dtypes", "float32,float32",
                 "--timer", "wall,wall", "--backends", "torch,torch")
    assert twice.timers == once.timers == ("wall",)
    assert [(c.key, [i.name for i in impls]) for c, impls in twice.cases] == \
        [(c.key, [i.name for i in impls]) for c, impls in once.cases]


@pytest.mark.parametrize("option,what", [("--workloads", "workload"), ("--impls", "implementation"),
                                         ("--backends", "backend"), ("--dtypes", "dtype"), ("--timer", "timer")])
@pytest.mark.parametrize("text", ["", ","])
def test_an_empty_list_is_refused_not_taken_as_everything(option, what, text):
    """--workloads \"$EMPTY\" from a script would otherwise sweep every workload."""
    from suite import cli
    from suite.args import UsageError
    from suite.runner import make_plan
    from suite.workload import discover

    args = cli.build_parser("run").parse_args(["run", "--device", "cpu", "--preset", "cpu", option, text])
    with pytest.raises(UsageError, match=f"no {what} given \\(an empty list\\); choose from "):
        make_plan(args, discover())


def test_show_refuses_an_empty_filter(tmp_path):
    from suite import store

    path = store.write_atomic(store.to_frame(_run_rows("r", "NVIDIA H200", "2026-01-01T00:00:00Z")),
                              tmp_path / "run.parquet")
    r = suite_here("show", "--rows", "--workloads", ",", str(path))
    assert r.returncode == 2 and "no workload given (an empty list); choose from gelu" in r.stderr, r.stderr[-500:]


@pytest.mark.parametrize("port", ["99999", "-5"])
def test_dashboard_refuses_a_port_out_of_range_before_streamlit(port, monkeypatch):
    import subprocess

    started = []
    monkeypatch.setattr(subprocess, "call", lambda *a, **k: started.append(a) or 0)
    r = suite_here("dashboard", "--headless", "--port", port)
    assert r.returncode == 2 and not started, r.stderr[-500:]
    assert r.stderr.startswith(f"error: --port {port}: expected a TCP port from 1 to 65535"), r.stderr


def test_ceilings_of_a_cpu_print_its_figures_and_no_nan(tmp_path, monkeypatch):
    """No datasheet row for a CPU: '-' in its columns; rates below 1 TFLOP/s keep two digits;
    every row's figures line up under the header."""
    from suite import ceilings, environment

    monkeypatch.setenv("KSUITE_CACHE_DIR", str(tmp_path))
    env = environment.collect("cpu")
    ceilings.save_cached(ceilings.Ceilings(
        device="cpu", gpu_name=env["gpu_name"], fingerprint=env["fingerprint"], copy_gbps=59.0,
        matmul_tflops={"float32": 0.2, "tf32": 0.2, "float16": 0.0028, "bfloat16": 0.4}, read_gbps=113.0,
        write_gbps=109.0, mix21_gbps=50.0, measured_at="2026-01-01T00:00:00Z", seconds=0.7))
    r = suite_here("ceilings", "--device", "cpu", "--cached")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    table = lines[lines.index(next(ln for ln in lines if ln.startswith("ceiling"))):]
    assert "nan" not in r.stdout.lower(), r.stdout
    assert len({len(ln) for ln in table}) == 1, table  # one column layout for every row
    f16 = next(ln for ln in table if "float16" in ln)
    assert f16.split()[-3:] == ["0.0028", "-", "-"], f16


def test_every_option_of_every_verb_says_what_it_does():
    import argparse

    from suite.cli import build_parser

    verbs = next(a for a in build_parser()._actions if a.dest == "verb").choices
    silent = []
    for verb in verbs:
        sub = next(a for a in build_parser(verb)._actions if a.dest == "verb").choices[verb]
        silent += [f"{verb} {a.option_strings[0] if a.option_strings else a.dest}" for a in sub._actions
                   if not isinstance(a, argparse._HelpAction) and not a.help]
    assert not silent, silent
