"""``kvtool models``: the bundled model profiles with their KV bytes per token."""

from typing import Annotated

import typer

from kvtool.model.config import spec_from_config
from kvtool.model.kv import kv_bytes_per_token
from kvtool.profiles.load import model_profiles, read_config_json


def models(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the bundled models and their KV bytes per token (formula, model dtype).

    Examples:

      kvtool models
    """
    from kvtool.cli.render import catalog as render
    from kvtool.cli.render.text import print_json

    rows = []
    for profile, folder in model_profiles():
        config = read_config_json(folder / "config.json")
        spec = spec_from_config(config, name=profile.name, source=f"bundled {profile.name}")
        rows.append((profile, spec, kv_bytes_per_token(spec)))
    if as_json:
        print_json(render.models_json(rows), command="models")
    else:
        render.print_models(rows)
