"""docs/doctor.md lists every observation key the doctor reads, so a snapshot can be assembled
by hand, and every check id the code can report."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parents[3]
DOC = (ROOT / "docs" / "doctor.md").read_text()


def test_every_snapshot_key_is_documented() -> None:
    code = (ROOT / "kvtool" / "probe" / "gather.py").read_text()
    code += (ROOT / "kvtool" / "doctor" / "run.py").read_text()
    keys = set(re.findall(r"host\.\w+\(\s*\"(\w+)\"", code))
    assert len(keys) >= 25
    missing = sorted(k for k in keys if f"`{k}." not in DOC and f"`{k}`" not in DOC)
    assert not missing


def test_every_check_id_is_documented() -> None:
    code = "".join(
        (ROOT / "kvtool" / "doctor" / f"{name}.py").read_text()
        for name in ("checks", "network", "aws")
    )
    code += (ROOT / "kvtool" / "plan" / "fsx_rules.py").read_text()  # shared with check
    ids = set(re.findall(r"_f\(\s*\"([a-z]+\.[a-z_]+)\"", code))
    assert len(ids) >= 28
    missing = sorted(i for i in ids if f"`{i}`" not in DOC)
    assert not missing
