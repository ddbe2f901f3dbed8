"""The I/O edge: every reader turns a missing, directory, binary, non-UTF-8 or malformed file
into one InputError naming the file (and the line and column where the parser knows them);
``write_text`` writes a whole file or nothing, through a temporary in the same folder."""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvtool.errors import InputError
from kvtool.files import (
    _loads_json,
    output_file,
    read_json_object,
    read_text,
    read_toml,
    read_yaml_mapping,
    write_text,
)

Reader = Callable[[Path], Any]
READERS: dict[str, tuple[Reader, str]] = {
    "text": (read_text, "file"),
    "toml": (read_toml, "TOML file"),
    "json": (read_json_object, "JSON file"),
    "yaml": (read_yaml_mapping, "workload file"),
}


def _error(call: Callable[[], object]) -> InputError:
    with pytest.raises(InputError) as caught:
        call()
    return caught.value


# --- what every reader refuses ------------------------------------------------------------------


@pytest.mark.parametrize("kind", READERS)
def test_a_missing_file_is_named(kind: str, tmp_path: Path) -> None:
    reader, _ = READERS[kind]
    path = tmp_path / "nope.cfg"
    error = _error(lambda: reader(path))
    assert error.message == f"cannot read {path}: No such file or directory"


@pytest.mark.parametrize("kind", READERS)
def test_a_directory_is_not_a_file(kind: str, tmp_path: Path) -> None:
    reader, what = READERS[kind]
    error = _error(lambda: reader(tmp_path))
    assert error.message == f"{tmp_path} is a directory, not a {what}"


@pytest.mark.parametrize("kind", READERS)
def test_a_binary_file_is_refused(kind: str, tmp_path: Path) -> None:
    reader, what = READERS[kind]
    path = tmp_path / "model.safetensors"
    path.write_bytes(b"a = 1\n\x00\x00\x01\x02")
    error = _error(lambda: reader(path))
    assert error.message == f"{path} is a binary file, not a {what}"
    assert error.hint == "pass the text file itself"


@pytest.mark.parametrize("kind", READERS)
def test_a_file_that_is_not_utf8_names_the_first_bad_byte(kind: str, tmp_path: Path) -> None:
    reader, what = READERS[kind]
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"name = 'caf" + "é'".encode("latin-1"))  # é is byte 11
    error = _error(lambda: reader(path))
    assert error.message == f"{path} is not UTF-8 text (byte 11), not a {what}"
    assert error.hint == "pass the text file itself"


def test_the_kind_of_file_is_said_as_the_caller_names_it(tmp_path: Path) -> None:
    error = _error(lambda: read_text(tmp_path, what="trace"))
    assert error.message == f"{tmp_path} is a directory, not a trace"
    path = tmp_path / "w.yaml"
    path.write_bytes(b"\x00")
    error = _error(lambda: read_yaml_mapping(path, what="CloudFormation template"))
    assert error.message == f"{path} is a binary file, not a CloudFormation template"


def test_read_text_decodes_utf8_exactly(tmp_path: Path) -> None:
    path = tmp_path / "note.md"
    path.write_bytes("KV für 128k → 16 GiB\r\n".encode())
    assert read_text(path) == "KV für 128k → 16 GiB\r\n"
    empty = tmp_path / "empty"
    empty.write_bytes(b"")
    assert read_text(empty) == ""


# --- TOML -------------------------------------------------------------------------------------


def test_toml_reads_into_a_dict(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text('name = "p5en"\nchips = 8\n[sources]\nchips = "AWS"\n')
    assert read_toml(path) == {"name": "p5en", "chips": 8, "sources": {"chips": "AWS"}}


def test_malformed_toml_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "node.toml"
    path.write_text("chips = 8\nhbm = = 141\n")
    error = _error(lambda: read_toml(path))
    assert error.message.startswith(f"{path}: not valid TOML: ")
    assert "(at line 2, column 7)" in error.message


# --- JSON -------------------------------------------------------------------------------------


def test_json_reads_one_object(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text('{"t3": {"read_gbps": 12.5}, "ok": true}')
    assert read_json_object(path) == {"t3": {"read_gbps": 12.5}, "ok": True}


def test_malformed_json_names_the_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text('{\n  "a": 1,\n  "b": }\n')
    error = _error(lambda: read_json_object(path))
    assert error.message == f"{path}: malformed JSON at line 3, column 8: Expecting value"
    assert error.hint == "fix the file or pass another"


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)


def _read_as_json_does(text: str) -> object:
    """json.loads' answer with kvtool's pairs hook: the value, or the error's type and text."""
    import json

    try:
        return ("value", json.dumps(json.loads(text, object_pairs_hook=dict), sort_keys=True))
    except (ValueError, RecursionError) as exc:
        return (type(exc).__name__, str(exc))


def _read_as_kvtool_does(text: str) -> object:
    import json

    try:
        return ("value", json.dumps(_loads_json(text, dict), sort_keys=True))
    except (ValueError, RecursionError) as exc:
        return (type(exc).__name__, str(exc))


@given(
    JSON_VALUES, st.sampled_from(["", " ", "\n\t", "\r\n "]), st.sampled_from(["", "x", ",", " ]"])
)
def test_json_is_read_as_json_loads_reads_it(value: object, space: str, tail: str) -> None:
    """kvtool reads JSON through json's C scanner alone (no json package on kvtool size's
    path); whatever the text, the answer is json.loads', its errors included."""
    import json

    for text in (space + json.dumps(value) + space + tail, json.dumps(value)[:-1]):
        assert _read_as_kvtool_does(text) == _read_as_json_does(text)


@settings(max_examples=300)
@given(st.text(alphabet='{}[]",:0123456789.eE-+ \ntrufalsnNIiy\ufeff\\', max_size=30))
def test_any_text_is_read_as_json_loads_reads_it(text: str) -> None:
    assert _read_as_kvtool_does(text) == _read_as_json_does(text)


def test_a_number_past_ints_digits_is_one_error_line(tmp_path: Path) -> None:
    """int() refuses over 4,300 digits with a ValueError that is not a JSONDecodeError: it
    was a traceback."""
    path = tmp_path / "config.json"
    path.write_text('{"hidden_size": ' + "1" * 5000 + "}")
    error = _error(lambda: read_json_object(path, what="model config"))
    assert error.message.startswith(f"{path}: malformed JSON: Exceeds the limit (4300 digits)")
    assert error.hint == "fix the file or pass another"


@pytest.mark.parametrize("top", ["[1, 2]", '"text"', "3", "null"])
def test_json_that_is_not_an_object_is_refused(top: str, tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(top)
    assert _error(lambda: read_json_object(path)).message == (
        f"{path}: a JSON object must be a JSON object"
    )
    error = _error(lambda: read_json_object(path, what="kvtool bench result"))
    assert error.message == f"{path}: a kvtool bench result must be a JSON object"


# --- YAML -------------------------------------------------------------------------------------


def test_yaml_reads_one_mapping(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text("model: llama-3.1-8b\ncontexts: [8k, 32k]\nsessions: 4\n")
    assert read_yaml_mapping(path) == {
        "model": "llama-3.1-8b",
        "contexts": ["8k", "32k"],
        "sessions": 4,
    }


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [
        ("a:\n\tb: 1\n", 2, 1),  # a tab cannot start a token
        ("a: 1\n  b: 2\n", 2, 4),  # a mapping value where none is allowed
        ('a: "open\n', 2, 1),  # the stream ends inside a string
    ],
)
def test_malformed_yaml_names_the_line_and_column(
    text: str, line: int, column: int, tmp_path: Path
) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    error = _error(lambda: read_yaml_mapping(path))
    assert error.message == f"{path}: malformed YAML at line {line}, column {column}"


def test_yaml_the_reader_refuses_without_a_position_is_still_one_line(tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text("a: \x07\n")  # a control character YAML does not accept
    assert _error(lambda: read_yaml_mapping(path)).message == f"{path}: malformed YAML"


@pytest.mark.parametrize("text", ["- a\n- b\n", "just text\n", "", "# only a comment\n"])
def test_yaml_that_is_not_a_mapping_is_refused(text: str, tmp_path: Path) -> None:
    path = tmp_path / "workload.yaml"
    path.write_text(text)
    assert _error(lambda: read_yaml_mapping(path)).message == (
        f"{path}: a workload file must be a YAML mapping"
    )
    error = _error(lambda: read_yaml_mapping(path, what="template"))
    assert error.message == f"{path}: a template must be a YAML mapping"


TEMPLATE = """\
Resources:
  Fs:
    Type: AWS::FSx::FileSystem
    Properties:
      SubnetIds: !Ref Subnets
      StorageCapacity: !GetAtt Sizes.Capacity
      Tags: !Join [",", [a, b]]
      Plain: !!str 1200
"""


def test_yaml_tags_are_refused_unless_read_as_values(tmp_path: Path) -> None:
    path = tmp_path / "template.yaml"
    path.write_text(TEMPLATE)
    error = _error(lambda: read_yaml_mapping(path, what="template"))
    assert error.message == f"{path}: malformed YAML at line 5, column 18"
    properties = read_yaml_mapping(path, what="template", tags_as_values=True)["Resources"]["Fs"][
        "Properties"
    ]
    assert properties == {
        "SubnetIds": {"Fn": "Ref"},
        "StorageCapacity": {"Fn": "GetAtt"},
        "Tags": {"Fn": "Join"},
        "Plain": "1200",  # a standard !!tag keeps its meaning
    }


def test_reading_tags_as_values_once_does_not_change_the_next_read(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "template.yaml"
    path.write_text(TEMPLATE)
    read_yaml_mapping(path, tags_as_values=True)
    with pytest.raises(InputError, match="malformed YAML at line 5"):
        read_yaml_mapping(path)
    with pytest.raises(yaml.YAMLError):
        yaml.safe_load(TEMPLATE)  # the shared SafeLoader learnt nothing either


# --- write_text -----------------------------------------------------------------------------


def test_write_text_writes_utf8_and_replaces_what_was_there(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    write_text(path, "first\n")
    assert path.read_bytes() == b"first\n"
    write_text(path, "zweite Größe\n")
    assert path.read_bytes() == "zweite Größe\n".encode()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]


def test_write_text_streams_an_iterable_through_a_temporary_in_the_same_folder(
    tmp_path: Path,
) -> None:
    path = tmp_path / "trace.jsonl"
    path.write_text("old\n")
    seen: list[tuple[list[str], str]] = []

    def lines() -> Iterator[str]:
        for i in range(3):
            # while streaming: the old file untouched beside one hidden temporary
            seen.append((sorted(p.name for p in tmp_path.iterdir()), path.read_text()))
            yield f"line {i}\n"

    write_text(path, lines())
    assert path.read_text() == "line 0\nline 1\nline 2\n"
    assert len(seen) == 3
    for names, content in seen:
        assert content == "old\n"
        assert len(names) == 2
        assert "trace.jsonl" in names
        (temporary,) = (n for n in names if n != "trace.jsonl")
        assert temporary.startswith(".trace.jsonl.")
        assert temporary.endswith(".tmp")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.jsonl"]


def test_write_text_takes_any_iterable_of_strings(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    write_text(path, ["a", "", "b\n", "c"])
    assert path.read_text() == "ab\nc"
    write_text(path, ())
    assert path.read_bytes() == b""


def test_a_failure_while_streaming_leaves_the_old_file_and_no_temporary(tmp_path: Path) -> None:
    path = tmp_path / "junit.xml"
    path.write_text("<old/>\n")

    def pieces() -> Iterator[str]:
        yield "<new>"
        raise RuntimeError("the renderer broke")

    with pytest.raises(RuntimeError, match="the renderer broke"):
        write_text(path, pieces())
    assert path.read_text() == "<old/>\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["junit.xml"]


def test_a_failure_to_write_a_new_file_leaves_nothing(tmp_path: Path) -> None:
    path = tmp_path / "new.txt"

    def pieces() -> Iterator[str]:
        yield "half"
        raise OSError(errno.ENOSPC, "No space left on device")

    error = _error(lambda: write_text(path, pieces()))
    assert error.message == f"cannot write {path}: No space left on device"
    assert list(tmp_path.iterdir()) == []


def test_a_failed_flush_to_disk_is_an_input_error_and_removes_the_temporary(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "report.txt"
    path.write_text("kept")
    synced: list[int] = []

    def broken_fsync(fd: int) -> None:
        synced.append(fd)
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr(os, "fsync", broken_fsync)
    error = _error(lambda: write_text(path, "lost"))
    assert synced  # it did try to flush the temporary to disk
    assert error.message == f"cannot write {path}: Input/output error"
    assert path.read_text() == "kept"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]


def test_a_folder_that_does_not_exist_is_named(tmp_path: Path) -> None:
    path = tmp_path / "missing" / "report.json"
    error = _error(lambda: write_text(path, "{}"))
    assert error.message == f"cannot write {path}: No such file or directory"
    assert list(tmp_path.iterdir()) == []


def test_a_file_where_the_folder_should_be_is_named(tmp_path: Path) -> None:
    blocker = tmp_path / "reports"
    blocker.write_text("a file, not a folder")
    path = blocker / "report.json"
    error = _error(lambda: write_text(path, "{}"))
    assert error.message == f"cannot write {path}: Not a directory"
    assert blocker.read_text() == "a file, not a folder"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["reports"]


def test_a_folder_where_the_file_should_be_is_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "report.json"
    path.mkdir()
    (path / "inside").write_text("keep")
    error = _error(lambda: write_text(path, "{}"))
    assert error.message == f"{path} is a folder, not a regular file"
    assert path.is_dir()
    assert (path / "inside").read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"]  # no temporary left


@settings(max_examples=30, deadline=None)
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",))), max_size=8))
def test_what_is_written_reads_back_whole(
    tmp_path_factory: pytest.TempPathFactory, pieces: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("w")
    path = folder / "f.txt"
    write_text(path, iter(pieces))
    assert path.read_bytes() == "".join(pieces).encode()
    write_text(path, "".join(reversed(pieces)))
    assert path.read_bytes() == "".join(reversed(pieces)).encode()
    assert [p.name for p in folder.iterdir()] == ["f.txt"]


def test_write_text_keeps_an_existing_files_mode_and_otherwise_the_umasks(tmp_path: Path) -> None:
    """mkstemp makes 0600 files: a shared trace or report used to become owner-only."""
    import os
    import stat

    from kvtool.files import write_text

    shared = tmp_path / "shared.jsonl"
    shared.write_text("old")
    shared.chmod(0o644)
    write_text(shared, "new")
    assert stat.S_IMODE(shared.stat().st_mode) == 0o644
    umask = os.umask(0o022)
    try:
        fresh = tmp_path / "fresh.xml"
        write_text(fresh, "<x/>")
    finally:
        os.umask(umask)
    assert stat.S_IMODE(fresh.stat().st_mode) == 0o644


def test_output_file_checks_the_target_before_any_work(tmp_path: Path) -> None:
    import os

    from kvtool.files import PLOT_SUFFIXES, output_file

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)  # never /dev/null: a rename over it would replace it
    good = tmp_path / "chart.PNG"
    assert output_file(good, option="--plot", suffixes=PLOT_SUFFIXES) == good  # any case
    for path, message in (
        (tmp_path, "is a folder"),
        (tmp_path / "none" / "x.xml", "does not exist"),
        (pipe, "is a FIFO, not a regular file"),
    ):
        with pytest.raises(InputError, match=message):
            output_file(path, option="--junit")
    with pytest.raises(InputError, match=r"'\.txt' is not a format kvtool writes") as caught:
        output_file(tmp_path / "x.txt", option="--plot", suffixes=PLOT_SUFFIXES)
    assert caught.value.hint == "name a .png, .svg or .pdf file"
    assert list(tmp_path.iterdir()) == [pipe]  # checking writes nothing


def test_output_folder_takes_a_new_or_empty_folder_only(tmp_path: Path) -> None:
    from kvtool.files import output_folder

    assert output_folder(tmp_path / "new", option="--capture") == tmp_path / "new"
    assert output_folder(tmp_path, option="--capture") == tmp_path  # empty
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is not empty"):
        output_folder(tmp_path, option="--capture")
    with pytest.raises(InputError, match="is a file"):
        output_folder(tmp_path / "f", option="--capture")


def test_write_bytes_is_whole_or_nothing(tmp_path: Path) -> None:
    from kvtool.files import write_bytes

    path = tmp_path / "chart.png"
    write_bytes(path, b"\x89PNG" + bytes(range(256)))
    assert path.read_bytes() == b"\x89PNG" + bytes(range(256))
    with pytest.raises(InputError, match="cannot write"):
        write_bytes(tmp_path / "missing" / "c.png", b"x")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chart.png"]


# --- what a write may replace -----------------------------------------------------------------


def test_a_link_at_the_target_is_refused_and_what_it_names_untouched(tmp_path: Path) -> None:
    """``--junit link`` wrote through the link: a link another user left in a shared folder
    (to /etc/passwd, say) had root's report written into its target."""
    real = tmp_path / "real" / "report.xml"
    real.parent.mkdir()
    real.write_text("old")
    link = tmp_path / "report.xml"
    link.symlink_to(real)
    with pytest.raises(InputError, match=r"^--junit .*report\.xml is a symbolic link \(to .*real"):
        output_file(link, option="--junit")
    with pytest.raises(InputError, match="kvtool never writes through a link"):
        write_text(link, "new")
    assert link.is_symlink()
    assert real.read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["real", "report.xml"]


def test_a_dangling_link_is_refused_not_replaced(tmp_path: Path) -> None:
    link = tmp_path / "out.yaml"
    link.symlink_to(tmp_path / "gone" / "out.yaml")
    with pytest.raises(InputError, match=r"^-o .*out\.yaml is a symbolic link \(to .*gone/out"):
        output_file(link, option="-o")
    with pytest.raises(InputError, match="never writes through a link"):
        write_text(link, "x")
    assert link.is_symlink()


def test_a_write_syncs_the_file_and_its_folder(tmp_path: Path, monkeypatch) -> None:
    synced: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append("folder" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    write_text(tmp_path / "out.json", "{}")
    assert synced == ["file", "folder"]


def test_a_fifo_or_a_link_to_one_is_never_replaced(tmp_path: Path) -> None:
    """As root, ``-o /dev/null`` renamed a temporary over the system's /dev/null. A FIFO here
    stands in for any special file (never a real device in a test)."""
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    link = tmp_path / "to-pipe"
    link.symlink_to(fifo)
    with pytest.raises(InputError, match="a FIFO, not a regular file"):
        write_text(fifo, "x")
    with pytest.raises(InputError, match="not a regular file"):
        output_file(fifo, option="-o")
    for call in (lambda: write_text(link, "x"), lambda: output_file(link, option="-o")):
        with pytest.raises(InputError, match="symbolic link"):
            call()
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["pipe", "to-pipe"]


@pytest.mark.parametrize("name", ["a\x00b", "x\ud800y"])
def test_a_path_no_file_can_have_is_one_error(name: str) -> None:
    """A plan's ``from_terraform: "\\ud800"`` (YAML keeps the lone surrogate) raised
    UnicodeEncodeError; a NUL byte, ValueError."""
    with pytest.raises(InputError, match="is no file name: it holds a character no path can"):
        read_text(Path(name))


def test_path_option_refuses_empty_and_control_characters() -> None:
    from kvtool.files import path_option

    assert path_option("/fsx/kv", option="--real") == Path("/fsx/kv")
    with pytest.raises(InputError, match=r"^--real is empty"):
        path_option(" ", option="--real")
    with pytest.raises(InputError, match="holds a control character"):
        path_option("/fsx/kv\n", option="--t3-dir")


@pytest.mark.parametrize(("suffix", "text"), [(".json", '{"a": ["\\ud800"]}'),
                                              (".yaml", 'a: {"\\ud83d": 1}\n')])  # fmt: skip
def test_a_lone_surrogate_escape_in_json_or_yaml_is_refused(
    tmp_path: Path, suffix: str, text: str
) -> None:
    """YAML keeps "\\ud83d\\ude00" as two lone surrogates: printing one raised
    UnicodeEncodeError from deep in a renderer."""
    path = tmp_path / f"in{suffix}"
    path.write_text(text)
    read = read_json_object if suffix == ".json" else read_yaml_mapping
    with pytest.raises(InputError, match=r"holds half a character \(a lone surrogate"):
        read(path)


def test_yaml_aliases_are_counted_as_they_would_expand(tmp_path: Path) -> None:
    from kvtool.files import read_yaml_mapping

    fine = tmp_path / "fine.yaml"
    fine.write_text("base: &b {x: 1}\nuse: *b\nagain: *b\n")  # a few aliases: read as usual
    assert read_yaml_mapping(fine) == {"base": {"x": 1}, "use": {"x": 1}, "again": {"x": 1}}
    bomb = tmp_path / "bomb.yaml"
    levels = ["a: &a [x, x, x, x, x, x, x]"] + [
        f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 7)}]" for i in range(7)
    ]  # 7 levels of 7: 7^8 = 5,764,801 nodes, 49 aliases
    bomb.write_text("\n".join(levels) + "\n")
    with pytest.raises(InputError, match="expand past 1,000,000 nodes"):
        read_yaml_mapping(bomb)


def test_a_key_given_twice_is_refused_in_yaml_and_json(tmp_path: Path) -> None:
    """YAML and JSON readers keep the last of two keys silently: ``nodes: 8`` then
    ``nodes: 9999`` planned 9999 nodes (issue 53). A merge's keys may still be set again."""
    path = tmp_path / "plan.yaml"
    path.write_text("model: m\nnodes: 8\nfsx:\n  same_az: true\nnodes: 9999\n")
    error = _error(lambda: read_yaml_mapping(path))
    assert error.message == f"{path}: the key 'nodes' is given twice in one mapping (lines 2 and 5)"
    assert error.hint == "keep one: kvtool does not guess which was meant"
    path.write_text("fsx:\n  same_az: true\n  mount_options: a\n  same_az: false\n")
    assert (
        "the key 'same_az' is given twice in one mapping (lines 2 and 4)"
        in _error(lambda: read_yaml_mapping(path)).message
    )
    path.write_text("1: a\n0x1: b\n")  # one key, spelled twice
    assert "the key '1' is given twice" in _error(lambda: read_yaml_mapping(path)).message
    path.write_text("base: &b {x: 1, y: 2}\nm:\n  <<: *b\n  x: 3\n")
    assert read_yaml_mapping(path) == {"base": {"x": 1, "y": 2}, "m": {"x": 3, "y": 2}}
    path = tmp_path / "plan.json"
    path.write_text('{"model": "m", "fsx": {"same_az": true, "same_az": false}}')
    error = _error(lambda: read_json_object(path))
    assert error.message == f"{path}: the key 'same_az' is given twice in one object"


def test_a_sigkilled_writes_temporary_is_swept_by_the_next_a_live_ones_is_not(
    tmp_path: Path,
) -> None:
    """SIGKILL runs no clean-up: ``engine gen -o`` left its trace so far (3.8 MB in 6 s here,
    until the disk filled in the attack run) as ``.big.jsonl.*.tmp`` for ever (issue 53). The
    temporary names its writer; the next write of that target removes a dead writer's, never
    a live one's or another host's."""
    import signal
    import subprocess
    import sys

    from kvtool.files import output_file

    target = tmp_path / "big.jsonl"
    code = (
        "import sys, time; from pathlib import Path; from kvtool.files import write_text\n"
        "def lines():\n"
        "    yield 'x' * 100_000\n"
        "    print('writing', flush=True); time.sleep(60)\n"
        "write_text(Path(sys.argv[1]), lines())\n"
    )
    argv = [sys.executable, "-c", code, str(target)]
    killed, live = (subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) for _ in range(2))
    try:
        for writer in (killed, live):
            assert writer.stdout is not None
            assert writer.stdout.readline() == "writing\n"
        temporaries = {p.name for p in tmp_path.iterdir()}
        assert len(temporaries) == 2
        killed.send_signal(signal.SIGKILL)
        killed.wait()
        other = tmp_path / ".big.jsonl.0123abcd-4242-1.xyz.tmp"  # another node's writer
        other.write_bytes(b"x")
        assert output_file(target, option="-o") == target
        left = {p.name for p in tmp_path.iterdir()}
        assert left == {other.name, next(n for n in temporaries if f"-{live.pid}-" in n)}
    finally:
        live.kill()
        live.wait()
