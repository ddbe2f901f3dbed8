"""Prices: the bundled example (labelled one), a user's file, and the Price List API through
boto3's own ``pricing`` client, its calls checked against the service model by botocore's
Stubber. The responses are CONSTRUCTED in the shape the API documents (PriceList: JSON text
of products with terms.OnDemand.*.priceDimensions.*.pricePerUnit.USD); no network."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest
from botocore.stub import Stubber

from kvtool.errors import InputError
from kvtool.inputs.hardware import resolve_hardware
from kvtool.inputs.prices import read_prices, resolve_prices


def test_the_bundled_example_says_it_is_one() -> None:
    prices = resolve_prices(None)
    assert prices.example is True
    assert "example" in prices.source
    assert prices.instance_hour["p5en.48xlarge"] > 0
    assert prices.fsx_gb_month["fsx-lustre-persistent2@1000"] > 0


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("[other]\nx = 1\n", r"has no \[prices\] table"),
        ('[prices]\ndate = "2026"\nregion = "r"\n', "needs source"),
        (
            '[prices]\nsource = "s"\ndate = "d"\nregion = "r"\n[prices.instance_hour]\n'
            '"p5.48xlarge" = -1\n',
            "must be a price >= 0",
        ),
        (
            '[prices]\nsource = "s"\ndate = "d"\nregion = "r"\n[prices.instance_hour]\n'
            '"p5.48xlarge" = true\n',
            "must be a number",
        ),
    ],
)
def test_a_bad_prices_file_is_one_input_error(tmp_path: Path, body: str, message: str) -> None:
    path = tmp_path / "prices.toml"
    path.write_text(body)
    with pytest.raises(InputError, match=message):
        read_prices(path)


def _product(usd: str) -> str:
    return json.dumps({
        "product": {"attributes": {"instanceType": "p5en.48xlarge"}},
        "terms": {"OnDemand": {"SKU.JRTCKXETXF": {"priceDimensions": {
            "SKU.JRTCKXETXF.6YS6EN2CT7": {"unit": "Hrs", "pricePerUnit": {"USD": usd}}}}}},
    })  # fmt: skip


def _client() -> tuple[object, Stubber]:
    client = boto3.client("pricing", region_name="us-east-1", aws_access_key_id="test",
                          aws_secret_access_key="test")  # fmt: skip
    return client, Stubber(client)


def test_aws_prices_ask_for_the_plans_node_file_system_and_bucket() -> None:
    hardware = resolve_hardware("p5en")
    client, stub = _client()
    for usd in ("61.00", "0.59", "0.022"):
        stub.add_response("get_products", {"PriceList": [_product(usd)], "FormatVersion": "aws_v1"})
    with stub:
        prices = resolve_prices("aws", hardware=hardware, client=client)
    stub.assert_no_pending_responses()
    assert prices.example is False
    assert prices.instance_hour == {"p5en.48xlarge": 61.0}
    assert prices.fsx_gb_month == {"fsx-lustre-persistent2@1000": 0.59}
    assert prices.s3_gb_month == {"s3-standard": 0.022}
    # not asked (their products' attribute names are not checked): named missing by the cost
    assert (prices.fsx_metadata_iops_month, prices.fsx_intelligent_tiering) == ({}, {})


def test_the_example_prices_metadata_iops_and_intelligent_tiering(tmp_path: Path) -> None:
    prices = resolve_prices(None)
    assert prices.fsx_metadata_iops_month == {"fsx-lustre-persistent2": 0.055}
    assert prices.fsx_intelligent_tiering["frequent-gb-month"] == 0.023
    assert prices.fsx_intelligent_tiering["throughput-mbps-month"] == 0.52
    path = tmp_path / "prices.toml"
    path.write_text('[prices]\nsource = "s"\ndate = "d"\nregion = "r"\n'
                    '[prices.fsx_intelligent_tiering]\n"frequent-gb-month" = -1\n')  # fmt: skip
    with pytest.raises(InputError, match=r"fsx_intelligent_tiering\.frequent-gb-month must be"):
        read_prices(path)


def test_aws_prices_without_an_answer_or_a_product_are_one_line() -> None:
    hardware = resolve_hardware("p5en")
    client, stub = _client()
    stub.add_response("get_products", {"PriceList": [], "FormatVersion": "aws_v1"})
    stub.add_response("get_products", {"PriceList": [_product("0.59")], "FormatVersion": "aws_v1"})
    stub.add_response("get_products", {"PriceList": [_product("0.022")], "FormatVersion": "aws_v1"})
    with stub:  # no product: left out, for the cost to name (issue 49), never an error
        prices = resolve_prices("aws", hardware=hardware, client=client)
    assert prices.instance_hour == {}
    assert prices.fsx_gb_month == {"fsx-lustre-persistent2@1000": 0.59}
    client, stub = _client()
    stub.add_client_error("get_products", "AccessDeniedException", "not authorized")
    with stub, pytest.raises(InputError, match="the Price List API refused"):
        resolve_prices("aws", hardware=hardware, client=client)
    with pytest.raises(InputError, match="is not one kvtool names"):
        resolve_prices("aws", region="mars-1", hardware=hardware, client=client)
    with pytest.raises(InputError, match="--region picks"):
        resolve_prices(None, region="us-east-1")
