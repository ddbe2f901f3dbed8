"""An ``aws fsx ...`` line kvtool prints, read as the AWS CLI reads it and checked against
FSx's own service model, with no network.

``aws_request`` hands the line to the AWS CLI's own driver (awscli, which maps each
``--option`` to a member of the operation's input shape and parses its shorthand or JSON) and
takes the parameters at ``before-parameter-build``, before any client or request is made; an
unknown option or a shorthand the CLI cannot parse is an error there. ``validate`` then runs
botocore's ``ParamValidator`` over the operation's input shape (required members, unknown
members, types, lengths) and checks what it leaves to the service: each string's enum and
pattern from the same model. Versions this was written against: botocore 1.43.11 (the ``fsx``
model's ``CreateDataRepositoryAssociation`` and ``CreateDataRepositoryTask``), awscli 1.45.11.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from typing import Any

# fake credentials, a region and no config files: the CLI reads no user setting, and the
# parameters are taken before a client exists, so nothing is signed or sent
ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
}


class _Taken(Exception):
    """Stops the CLI once it has built the parameters."""


def aws_request(argv: list[str] | str) -> tuple[str, dict[str, Any]]:
    """The operation and parameters the AWS CLI builds from ``argv`` (``aws fsx ...``, a list
    or one shell line); AssertionError with the CLI's own message where it refuses it."""
    from awscli.clidriver import create_clidriver

    words = shlex.split(argv) if isinstance(argv, str) else list(argv)
    assert words[:2] == ["aws", "fsx"], words
    taken: dict[str, Any] = {}

    def take(params: dict[str, Any], model: Any, **_: Any) -> None:
        taken.update(operation=model.name, params=dict(params))
        raise _Taken

    saved = {key: os.environ.get(key) for key in ENV}
    os.environ.update(ENV)
    err, out = io.StringIO(), io.StringIO()
    try:
        driver = create_clidriver()
        driver.session.register("before-parameter-build.fsx", take)
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
            driver.main(words[1:])
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    assert "params" in taken, f"the AWS CLI refused {words}: {err.getvalue().strip()[-600:]}"
    return taken["operation"], taken["params"]


def validate(operation: str, params: dict[str, Any]) -> None:
    """botocore's ParamValidator over ``operation``'s input shape in the ``fsx`` model, then
    every string's enum and pattern (which the validator leaves to the service)."""
    import botocore.session
    from botocore.validate import ParamValidator

    model = botocore.session.get_session().get_service_model("fsx")
    shape = model.operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    assert not report.has_errors(), report.generate_report()
    _strings(params, shape, operation)


def _strings(value: Any, shape: Any, where: str) -> None:
    if shape.type_name == "structure":
        for name, member in value.items():
            _strings(member, shape.members[name], f"{where}.{name}")
    elif shape.type_name == "list":
        for i, item in enumerate(value):
            _strings(item, shape.member, f"{where}[{i}]")
    elif shape.type_name == "string":
        assert not shape.enum or value in shape.enum, f"{where}: {value!r} not in {shape.enum}"
        pattern = shape.metadata.get("pattern")
        assert pattern is None or re.search(pattern, value), f"{where}: {value!r} !~ {pattern}"
