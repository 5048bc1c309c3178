"""The lab notebook: one-off probes (``python3 -m lab.<probe>``) and their findings (lab/findings/).

Nothing outside lab/ imports it; README.md indexes question -> probe -> finding.
"""
