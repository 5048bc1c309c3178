"""Text from the URL or from a results file, made inert before it is shown.

Streamlit renders Markdown (links, images, autolinks) in captions, alerts,
titles, widget labels and expander labels, and Plotly renders a subset of
HTML (``<a href>``, ``<br>``) in titles, trace names and hover text.  Values
that come from a visitor's link or from a Parquet file (error messages,
configs, commit names, implementation names, paths) therefore go through
:func:`md` before they reach a Markdown string and :func:`html` before they
reach a figure; long values are cut by :func:`clip` first, so a 100 KB query
value is shown as 80 characters and never laid out whole.
"""
from __future__ import annotations

import html as _html
import re

import pandas as pd

SHOWN_CHARS = 80     # one value, as named in a note
SHOWN_VALUES = 10    # values named in one note; the rest are counted
ZWSP = "\u200b"
# every ASCII punctuation character
_MD_SPECIAL = re.compile(r"([!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~])")


def clip(value, limit: int = SHOWN_CHARS) -> str:
    """``value`` as one line of at most ``limit`` characters (an ellipsis marks a cut)."""
    text = " ".join(str(value).split()) if len(str(value)) <= 4 * limit else \
        " ".join(str(value)[:4 * limit].split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def md(value, limit: int | None = SHOWN_CHARS) -> str:
    """``value`` as Markdown that shows its characters: every punctuation mark
    becomes a numeric character reference (``[`` is ``&#91;``), decoded only
    after parsing, so no link, image, tag, emphasis or code span can form; and
    a zero-width space follows each ``:``, ``.`` and ``@``, since Streamlit
    turns any ``http://``, ``www.`` or e-mail text into a link after parsing.
    Prefer :func:`plain` in ``st.text`` where the value need not sit in prose."""
    text = clip(value, limit) if limit else str(value)
    return _MD_SPECIAL.sub(lambda m: f"&#{ord(m.group(1))};" + (ZWSP if m.group(1) in ":.@" else ""), text)


def plain(values, limit: int = SHOWN_VALUES) -> str:
    """Up to ``limit`` values, clipped, one per line, then how many more: for st.text."""
    values = list(values)
    more = [f"and {len(values) - limit} more"] if len(values) > limit else []
    return "\n".join([clip(v) for v in values[:limit]] + more)


def listing(values, limit: int = SHOWN_VALUES) -> str:
    """Up to ``limit`` values, clipped and Markdown-escaped (:func:`md`), then how many more."""
    values = list(values)
    shown = ", ".join(md(v) for v in values[:limit])
    return shown + (f", and {len(values) - limit} more" if len(values) > limit else "")


def html(value) -> str:
    """``value`` for Plotly text: ``&``, ``<`` and ``>`` as entities, so no tag forms."""
    return _html.escape(str(value), quote=False)


def html_columns(df: pd.DataFrame, columns) -> pd.DataFrame:
    """A copy of ``df`` whose text ``columns`` (those present) are :func:`html`-escaped."""
    present = [c for c in columns if c in df.columns]
    if not present:
        return df
    return df.assign(**{c: df[c].map(lambda v: v if not isinstance(v, str) else html(v))
                        for c in present})
