"""``--prices``: a prices file (TOML, the bundled example's keys), the bundled example itself
(the default, labelled an example), or ``aws``: AWS's Price List API through boto3's
``pricing`` client (its endpoint is in us-east-1; ``--region`` picks whose prices)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvtool.errors import InputError
from kvtool.plan.cost import Prices

if TYPE_CHECKING:
    from kvtool.plan.deployment import Hardware

TABLES = ("instance_hour", "fsx_gb_month", "s3_gb_month", "s3_put_per_1000", "s3_get_per_1000",
          "fsx_metadata_iops_month", "fsx_intelligent_tiering")  # fmt: skip
EXAMPLE = "example-us-east-1.toml"
# the Price List API's names for the FSx deployment types and S3 storage classes
DEPLOYMENTS = {"fsx-lustre-persistent2": "PERSISTENT_2", "fsx-lustre-persistent1": "PERSISTENT_1",
               "fsx-lustre-scratch2": "SCRATCH_2"}  # fmt: skip
S3_CLASSES = {"s3-standard": "General Purpose", "s3-express-one-zone": "High Performance"}
# AWS's location names for the regions a Price List filter asks by (pricing uses "location")
LOCATIONS = {
    "us-east-1": "US East (N. Virginia)",
    "us-east-2": "US East (Ohio)",
    "us-west-2": "US West (Oregon)",
    "eu-west-1": "EU (Ireland)",
    "eu-central-1": "EU (Frankfurt)",
    "ap-northeast-1": "Asia Pacific (Tokyo)",
    "ap-southeast-2": "Asia Pacific (Sydney)",
}


MAX_PRICE = 1e9  # USD per unit (an hour, a GB-month, a million requests): past any real price


def resolve_prices(
    text: str | None, *, region: str | None = None, hardware: Hardware | None = None,
    client: Any = None,
) -> Prices:  # fmt: skip
    """The prices ``--prices`` names: None, the bundled example; ``aws``, the Price List
    API for ``hardware``'s node and storage in ``region`` (``client``: a boto3 ``pricing``
    client, made here when None); else a TOML file."""
    if text is not None and text.strip().lower() == "aws":
        if hardware is None:
            raise InputError("--prices aws asks for the plan's node and storage", "add --hardware")
        return aws_prices(hardware, region or "us-east-1", client)
    if region is not None:
        raise InputError("--region picks whose prices --prices aws asks for",
                         "drop --region, or add --prices aws")  # fmt: skip
    from kvtool.profiles.load import builtin_root

    path = builtin_root() / "prices" / EXAMPLE if text is None else Path(text)
    return read_prices(path)


def read_prices(path: Path) -> Prices:
    """A prices TOML: ``[prices]`` with source, date, region, example, and the tables."""
    from kvtool.files import read_toml

    data = read_toml(path).get("prices")
    if not isinstance(data, dict):
        raise InputError(f"{path} has no [prices] table", f"see the bundled {EXAMPLE}")
    for key in ("source", "date", "region"):
        if not isinstance(data.get(key), str) or not data[key].strip():
            raise InputError(
                f"{path}: [prices] needs {key} (text)", "say where the prices came from"
            )
    tables = {}
    for name in TABLES:
        table = data.get(name, {})
        if not isinstance(table, dict):
            raise InputError(f"{path}: [prices.{name}] must be a table of prices")
        for key, value in table.items():
            if isinstance(value, bool) or not isinstance(value, int | float):
                raise InputError(f"{path}: {name}.{key} must be a number, got {value!r}")
            if not 0 <= value < math.inf:
                raise InputError(f"{path}: {name}.{key} must be a price >= 0, got {value!r}")
            if value > MAX_PRICE:  # multiplied by hours and bytes it would overflow to inf
                raise InputError(
                    f"{path}: {name}.{key} {value:g} USD is past any AWS price",
                    f"give prices in USD, below {MAX_PRICE:g}",
                )
        tables[name] = {str(k): float(v) for k, v in table.items()}
    transfer = data.get("transfer", {})
    cross = transfer.get("cross_az_per_gb") if isinstance(transfer, dict) else None
    if cross is not None and (
        isinstance(cross, bool) or not isinstance(cross, int | float) or not 0 <= cross <= MAX_PRICE
    ):
        raise InputError(f"{path}: transfer.cross_az_per_gb must be a price >= 0")
    return Prices(
        source=data["source"], date=data["date"], region=data["region"],
        example=bool(data.get("example", False)),
        cross_az_per_gb=None if cross is None else float(cross), **tables,
    )  # fmt: skip


def _on_demand(price_list: list[str]) -> float | None:
    """The On-Demand USD price of the first product in a ``get_products`` PriceList."""
    for item in price_list:
        product = json.loads(item)
        for term in product.get("terms", {}).get("OnDemand", {}).values():
            for dimension in term.get("priceDimensions", {}).values():
                usd = dimension.get("pricePerUnit", {}).get("USD")
                if usd is not None and float(usd) > 0:
                    return float(usd)
    return None


def _ask(client: Any, service: str, filters: dict[str, str]) -> float | None:
    response = client.get_products(
        ServiceCode=service,
        Filters=[{"Type": "TERM_MATCH", "Field": k, "Value": v} for k, v in filters.items()],
        MaxResults=10,
    )
    return _on_demand(response.get("PriceList", []))


def aws_prices(hardware: Hardware, region: str, client: Any = None) -> Prices:
    """The plan's node, file system and bucket prices from AWS's Price List API."""
    location = LOCATIONS.get(region)
    if location is None:
        raise InputError(f"--region {region!r} is not one kvtool names to the Price List API",
                         "choose " + ", ".join(LOCATIONS))  # fmt: skip
    if client is None:
        from kvtool.probe.host import pricing_client

        client = pricing_client()
    node = hardware.node.name
    try:
        hourly = _ask(client, "AmazonEC2", {
            "instanceType": node, "location": location, "operatingSystem": "Linux",
            "tenancy": "Shared", "preInstalledSw": "NA", "capacitystatus": "Used",
        })  # fmt: skip
        fs = hardware.file_system()
        deployment = DEPLOYMENTS.get(fs.profile.name)
        fsx = None if deployment is None else _ask(client, "AmazonFSx", {
            "fileSystemType": "Lustre", "location": location, "deploymentOption": deployment,
            "throughputCapacity": str(fs.throughput_mbps_per_tib), "storageType": "SSD",
        })  # fmt: skip
        storage_class = S3_CLASSES.get(hardware.t4.name, "")
        s3 = _ask(client, "AmazonS3", {"location": location, "storageClass": storage_class})
    except OSError as exc:  # botocore's connection errors are OSErrors
        raise InputError(f"the Price List API did not answer ({exc})",
                         "pass --prices FILE, or retry where AWS answers") from None  # fmt: skip
    except Exception as exc:  # botocore ClientError, NoCredentialsError: said, not a traceback
        raise InputError(f"the Price List API refused ({type(exc).__name__}: {exc})",
                         "check AWS credentials, or pass --prices FILE") from None  # fmt: skip
    # a product the Price List lacks is left out: the plan prints, and its cost names the
    # missing price and how to give it (plan/cost.py). Provisioned Metadata IOPS and FSx
    # Intelligent-Tiering are not asked: their products' attribute names were not checked
    # against the Price List, so the cost names them as missing prices
    key = f"{fs.profile.name}@{fs.throughput_mbps_per_tib}"
    return Prices(
        source=f"AWS Price List API ({region})", date="as asked", region=region, example=False,
        instance_hour={} if hourly is None else {node: hourly},
        fsx_gb_month={} if fsx is None else {key: fsx},
        s3_gb_month={} if s3 is None else {hardware.t4.name: s3},
        s3_put_per_1000={}, s3_get_per_1000={},
    )  # fmt: skip
