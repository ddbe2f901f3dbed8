"""The folders gc refuses, by identity: /, home folders and every folder above one, a
system's root folder; an engine's KV folder beside them is accepted."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from kvtool.errors import InputError
from kvtool.folders.guard import home_folders, protected, refuse_system_folder
from kvtool.folders.walk import Root


def _refused(path: Path, homes: list[str]) -> str | None:
    with Root(path) as root:
        try:
            refuse_system_folder(root, homes=homes)
        except InputError as exc:
            return str(exc)
    return None


def test_root_home_and_every_folder_above_a_home_are_refused(tmp_path):
    home = tmp_path / "users" / "alice"
    (home / ".config").mkdir(parents=True)
    kv = tmp_path / "fsx" / "kv"
    kv.mkdir(parents=True)
    homes = [str(home)]
    assert "the root folder /" in (_refused(Path("/"), homes) or "")
    assert "the home folder" in (_refused(home, homes) or "")
    assert "holds the home folder" in (_refused(home.parent, homes) or "")
    assert "holds the home folder" in (_refused(tmp_path, homes) or "")
    assert _refused(kv, homes) is None
    assert _refused(home / ".config", homes) is None  # below a home: a folder like any other


def test_a_folder_holding_a_systems_own_folders_is_refused(tmp_path):
    image = tmp_path / "rootfs"
    for name in ("etc", "proc"):
        (image / name).mkdir(parents=True)
    assert "system's root folder (it holds etc/)" in (_refused(image, []) or "")
    (tmp_path / "kv").mkdir()
    (tmp_path / "kv" / "var").write_text("a file named var is not a system folder")
    assert _refused(tmp_path / "kv", []) is None


def test_refusal_is_by_identity_not_spelling(tmp_path):
    home = tmp_path / "home" / "bob"
    home.mkdir(parents=True)
    spelled = tmp_path / "home" / "bob" / ".." / "bob"
    assert "the home folder" in (_refused(spelled, [str(home)]) or "")
    mount = tmp_path / "bound"
    mount.mkdir()
    if subprocess.run(["mount", "--bind", str(home), str(mount)], capture_output=True).returncode:
        pytest.skip("this user cannot bind-mount (the spelled path above was checked)")
    try:
        assert "the home folder" in (_refused(mount, [str(home)]) or "")
    finally:
        subprocess.run(["umount", str(mount)], check=True)


def test_home_folders_come_from_home_sudo_and_passwd():
    passwd = "root:x:0:0:root:/root:/bin/bash\nsvc:x:5:5::/var/lib/svc:/usr/sbin/nologin\nbad\n"
    homes = home_folders({"HOME": "/home/me"}, passwd)
    assert homes[0] == "/home/me"
    assert {"/root", "/var/lib/svc"} <= set(homes)
    found = protected(["/nonexistent/home"])  # a home that does not exist guards nothing
    assert all(why != "the home folder /nonexistent/home" for why in found.values())
    assert any(why == "the root folder /" for why in found.values())


def test_this_users_own_home_is_refused():
    home = os.path.expanduser("~")
    if not os.path.isdir(home) or home == "/":
        pytest.skip("this user has no home folder")
    assert "home folder" in (_refused(Path(home), home_folders()) or "")


@pytest.mark.parametrize(
    "folder",
    ["/etc", "/usr", "/usr/lib", "/usr/share/doc", "/var/log", "/var", "/boot", "/bin", "/sbin",
     "/dev", "/run", "/proc", "/proc/self", "/sys", "/sys/kernel", "/tmp", "/var/tmp", "/opt",
     "/usr/share/..", "/etc/../etc"],
)  # fmt: skip
def test_the_systems_own_folders_everything_below_them_and_shared_ones_are_refused(folder):
    if not os.path.isdir(folder):
        pytest.skip(f"{folder} is not on this machine")
    why = _refused(Path(folder).resolve(), [])  # as gc's front door resolves DIR (/bin: a link)
    assert why is not None, f"{folder} was accepted"
    assert "kvtool gc never cleans it" in why


def test_below_tmp_and_var_tmp_a_kv_folder_is_accepted(tmp_path):
    assert _refused(tmp_path, []) is None  # the suite's own temporary folder lies below /tmp
    import tempfile

    with tempfile.TemporaryDirectory(dir="/var/tmp") as below:
        assert _refused(Path(below), []) is None


def test_a_pseudo_file_system_is_refused_wherever_it_is_mounted(tmp_path):
    from kvtool.folders.guard import pseudo_file_system

    with Root(Path("/proc")) as root:
        assert pseudo_file_system(root.fd) == "proc"
    with Root(tmp_path) as root:
        assert pseudo_file_system(root.fd) is None
    mount = tmp_path / "proc"
    mount.mkdir()
    if subprocess.run(["mount", "-t", "proc", "proc", str(mount)], capture_output=True).returncode:
        pytest.skip("this user cannot mount (/proc itself was checked)")
    try:
        assert "pseudo file system proc" in (_refused(mount, []) or "")
    finally:
        subprocess.run(["umount", str(mount)], check=True)
