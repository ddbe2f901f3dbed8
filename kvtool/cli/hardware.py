"""``kvtool hardware``: the bundled node and storage profiles."""

from typing import Annotated

import typer

from kvtool.profiles.load import node_profiles, storage_profiles


def hardware(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON instead of a table.")] = False,
) -> None:
    """List the bundled accelerator-node and storage profiles (sources in profiles/*.toml).

    Examples:

      kvtool hardware

      kvtool plan deepseek-r1 --hardware p5en --ctx 128K --sessions 500 --nodes 4
    """
    from kvtool.cli.render import catalog as render
    from kvtool.cli.render.text import print_json

    nodes, storage = node_profiles(), storage_profiles()
    if as_json:
        print_json(render.hardware_json(nodes, storage), command="hardware")
    else:
        render.print_hardware(nodes, storage)
