import os

import pytest

from kvtool.errors import InputError
from kvtool.inputs import folders
from kvtool.inputs.folders import parse_limit_size, resolve_folder, resolve_gc


class Host:
    def __init__(self, mounts=None):
        self.mounts = mounts

    def read(self, key, path):
        assert (key, path) == ("proc_mounts", "/proc/self/mounts")
        return self.mounts


def _gc(path, **kw):
    options = dict(
        host=Host(), max_size="1TiB", max_age=None, keep_free=None, grace="10m", layout=None,
        model=None, include_unknown=False, dry_run=False, log=None,
    )  # fmt: skip
    options.update(kw)
    return resolve_gc(str(path), **options)


def test_the_folder(tmp_path):
    found = resolve_folder(
        str(tmp_path), host=Host(f"/dev/x {tmp_path} xfs rw,noatime 0 0\n"), world="8"
    )
    assert (found.root, found.mode, found.world) == (tmp_path.resolve(), "noatime", 8)
    with pytest.raises(InputError, match="does not exist"):
        resolve_folder(str(tmp_path / "nope"), host=Host())
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is a file, not a folder"):
        resolve_folder(str(tmp_path / "f"), host=Host())
    with pytest.raises(InputError, match="--world"):
        resolve_folder(str(tmp_path), host=Host(), world="0")
    assert resolve_folder(str(tmp_path), host=Host(), tp="4", pp="2").world == 8
    assert resolve_folder(str(tmp_path), host=Host(), pp="2").world == 2
    assert resolve_folder(str(tmp_path), host=Host()).world is None
    with pytest.raises(InputError, match="--world is tp x pp"):
        resolve_folder(str(tmp_path), host=Host(), tp="2", world="2")
    with pytest.raises(InputError, match="at least 1"):
        resolve_folder(str(tmp_path), host=Host(), tp="0")


def test_a_model_is_every_name_its_files_may_carry():
    names = folders.model_names("llama-3.1-8b")
    assert names is not None
    assert names[0] == "llama-3.1-8b"
    assert "meta-llama/Llama-3.1-8B" in names
    assert folders.model_names("my-served-finetune") == ("my-served-finetune",)
    assert folders.model_names(None) is None
    with pytest.raises(InputError, match="--model is empty"):
        folders.model_names("  ")
    with pytest.raises(InputError, match="DIR is empty"):
        resolve_folder("", host=Host())


def test_limits_parse_or_say_what_is_wrong(tmp_path):
    got = _gc(tmp_path, max_size="0", max_age="7d", keep_free="500GiB", grace="90s")
    assert got.limits == folders.Limits(0, 7 * 86400.0, 500 * 1024**3, 90.0)
    assert parse_limit_size("4TiB", what="--max-size") == 4 * 1024**4
    for bad, match in [
        ({"max_size": "lots"}, "--max-size 'lots' is not a size"),
        ({"max_age": "7"}, "--max-age '7' is not a duration"),
        ({"grace": "soon"}, "--grace 'soon' is not a duration"),
        ({"keep_free": "-1GB"}, "--keep-free"),
        ({"max_size": None}, "gc needs a limit"),
        ({"layout": "redis"}, "--layout 'redis' is not a layout kvtool knows"),
        ({"log": tmp_path / "gc.jsonl"}, "inside"),
        ({"log": tmp_path / "no" / "gc.jsonl"}, "does not exist"),
    ]:
        with pytest.raises(InputError, match=match):
            _gc(tmp_path, **bad)


def test_a_folder_gc_cannot_change_is_refused_up_front_but_a_dry_run_reads_it(
    tmp_path, monkeypatch
):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: False if mode & os.W_OK else real(p, mode))
    with pytest.raises(InputError, match="not writable by this user: gc cannot remove anything"):
        _gc(tmp_path)
    assert _gc(tmp_path, dry_run=True).dry_run
