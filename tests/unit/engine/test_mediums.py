"""Which mediums a run gets (engine/mediums.py): the T4 URL checked before any work."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kvtool.errors import InputError


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("s3://", "is not s3://bucket/prefix or file:///path"),
        ("s3:///x", "is not s3://bucket/prefix"),
        ("s3://My_Bucket/kv", "'My_Bucket' is not an S3 bucket name"),
        ("s3://b/kv", "'b' is not an S3 bucket name"),
        ("s3://bucket/kv\nx", "holds a control character"),
        ("file://", "names no absolute folder"),  # was T4 in the current folder, exit 0
        ("file://relative/dir", "names no absolute folder"),
        ("file:///no/such/folder", "/no/such/folder is not a folder"),
        ("ftp://x", "is not s3://bucket/prefix"),
    ],
)
def test_a_t4_url_that_cannot_work_is_refused_by_name(url: str, message: str) -> None:
    from kvtool.engine.mediums import check_t4_url

    with pytest.raises(InputError, match=re.escape(message)):
        check_t4_url(url)


def test_good_t4_urls_pass(tmp_path: Path) -> None:
    from kvtool.engine.mediums import check_t4_url

    for url in ("s3://my-bucket.kv/prefix/", "s3://abc", f"file://{tmp_path}"):
        assert check_t4_url(url) == url
