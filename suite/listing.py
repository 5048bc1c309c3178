"""``python -m suite list``: which implementation runs where, and why not."""
from __future__ import annotations

import argparse


def configure(p: argparse.ArgumentParser) -> None:
    p.add_argument("--device", choices=("cuda", "cpu"), help="default: cuda when a GPU is visible, else cpu")
    p.add_argument("--plugin", action="append", default=[], metavar="MODULE|PATH",
                   help="also list the implementations this module or .py file registers (repeatable)")


def main(args) -> int:
    from rich.console import Console
    from rich.table import Table

    from suite.environment import pick_device
    from suite.plain import rich_text
    from suite.workload import discover

    device = pick_device(args.device)
    reg = discover(args.plugin)
    console = Console(width=160)
    table = Table(title=f"workloads x implementations on {device}")
    for col in ("workload", "implementation", "status", "reason / description"):
        table.add_column(col)
    for name in sorted(reg.workloads):
        wl = reg.workloads[name]
        for impl in reg.for_workload(name):
            reason = impl.check_available(device)
            status = "[green]available[/]" if reason is None else "[yellow]unavailable[/]"
            note = "" if impl.in_default_sweep else " (runs only when named with --impls)"
            if impl.source != "builtin":
                note += f" ({impl.source})"
            table.add_row(rich_text(name), rich_text(impl.name), status, rich_text((reason or impl.description) + note))
        for (w, backend), reason in sorted(reg.broken.items()):
            if w == name:
                table.add_row(rich_text(name), rich_text(backend), "[red]broken[/]", rich_text(reason))
        table.add_row("", "", "", f"[dim]{rich_text(wl.bound)} bound; presets "
                      + ", ".join(f"{rich_text(p)} ({len(s)} shapes)" for p, s in wl.presets.items())
                      + (f", fuzz ({wl.fuzz_count} shapes from --seed)" if "fuzz" in wl.preset_names() else "")
                      + "[/]",
                      end_section=True)
    console.print(table)
    return 0
