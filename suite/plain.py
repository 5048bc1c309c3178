"""Values from Parquet files, plugins or the command line, made inert before they are printed.

rich reads ``[...]`` in any string it prints as markup: a stored error text
holding ``[/]`` raises, and ``[link=...]`` prints as a hyperlink.  Markdown (the
comparison posted on a pull request) renders links, images and HTML.  ``rich_text``
and ``md_text`` make such a value print as the characters it holds.
"""
from __future__ import annotations

import re

from rich.markup import escape

_MD_SPECIAL = re.compile(r"([\\`*_\[\]<>|!~#&])")


def rich_text(value) -> str:
    """``value`` as a string that rich prints literally (its markup brackets escaped)."""
    return escape(str(value))


def md_text(value) -> str:
    """``value`` as Markdown that renders as its own characters: no link, image, HTML tag,
    emphasis or table cell break (each Markdown-special character backslash-escaped)."""
    return _MD_SPECIAL.sub(r"\\\1", str(value).replace("\n", " "))
