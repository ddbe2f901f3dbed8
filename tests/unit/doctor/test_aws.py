"""The AWS checks alone, on a recorded healthy node: the file system as FSx describes it
becomes the facts the settings rules grade (the same rules kvtool check applies)."""

from __future__ import annotations

import pytest

from kvtool.doctor.aws import check_aws, described_facts, kv_export
from kvtool.doctor.checks import DoctorOptions
from kvtool.probe.gather import GatherOptions, gather
from kvtool.probe.host import SnapshotHost
from tests.aws_cli import aws_request, validate

from .snapshots import KV_PATH, healthy


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory):
    folder = healthy(tmp_path_factory.mktemp("snap") / "healthy")
    return gather(SnapshotHost(folder), KV_PATH, GatherOptions())


def test_the_described_file_system_becomes_the_settings_facts(node) -> None:
    fs = node.aws.file_system
    assert fs is not None
    settings = described_facts(node.aws, fs)
    assert settings.deployment_type == "PERSISTENT_2"
    assert settings.storage_capacity_gib == 28_800
    assert settings.per_unit_storage_throughput == 1000


def test_the_throughput_is_held_to_the_nodes_links(node) -> None:
    one = {f.id: f for f in check_aws(node, DoctorOptions(nodes=1))}
    many = {f.id: f for f in check_aws(node, DoctorOptions(nodes=16))}
    assert "28.1 GB/s per node against a 87.5 GB/s client link" in one["aws.throughput"].message
    assert "1.8 GB/s per node" in many["aws.throughput"].message  # shared by 16 nodes
    assert "for 16 node(s)" in many["aws.throughput"].evidence
    assert {one["aws.throughput"].status, many["aws.throughput"].status} == {"WARN"}


def test_the_kv_folders_association_and_export_policy_are_reported(node) -> None:
    """The recorded association (FileSystemPath /kvcache; the healthy node has auto-export
    off) holds the KV folder /mnt/lustre/kvcache of the mount at /mnt/lustre."""
    found = kv_export(node)
    assert found.status == "PASS"
    assert "KV folder /kvcache: dra-0123456789abcdef0 ->" in found.message
    assert "s3://example-kvcache-bucket/kvcache/" in found.message
    assert "auto-export off" in found.message
    assert "EXPORT_TO_REPOSITORY" in found.message
    assert found.id in {f.id for f in check_aws(node, DoctorOptions())}
    (dra,) = node.aws.associations
    events = {**dra, "S3": {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}}}
    on = kv_export(node._replace(aws=node.aws._replace(associations=[events])))
    assert "auto-export on (NEW, CHANGED, DELETED)" in on.message
    elsewhere = {**dra, "FileSystemPath": "/kvcache-other"}
    none = kv_export(node._replace(aws=node.aws._replace(associations=[elsewhere])))
    assert none.status == "WARN"
    assert "gc --release has nothing to release" in none.message
    root = {**dra, "FileSystemPath": "/"}
    assert kv_export(node._replace(aws=node.aws._replace(associations=[root]))).status == "PASS"
    unread = kv_export(node._replace(aws=node.aws._replace(associations=None)))
    assert unread.status == "SKIP"


def test_the_fix_for_a_folder_no_association_holds_is_a_line_fsx_accepts(node) -> None:
    """The fix is the DRA line --emit prints (plan/release.py's create_association), whole:
    the described file system's id, the folder's path on it, the bucket left as $BUCKET;
    read by the AWS CLI's own driver and checked against botocore's FSx model. Without a
    description, the id is $FSX_ID too."""
    (dra,) = node.aws.associations
    elsewhere = {**dra, "FileSystemPath": "/kvcache-other"}
    lone = node._replace(aws=node.aws._replace(associations=[elsewhere]))
    fix = kv_export(lone).fix
    assert "set BUCKET to an S3 general purpose bucket in the file system's Region, then aws" in fix
    line = fix[fix.index("aws fsx create") :].replace("$BUCKET", "kv-export-bucket")
    operation, params = aws_request(line)
    validate(operation, params)
    assert operation == "CreateDataRepositoryAssociation"
    assert params == {
        "FileSystemId": "fs-0a0a63dea8324225b",
        "FileSystemPath": "/kvcache",
        "DataRepositoryPath": "s3://kv-export-bucket/kvcache/",
        "S3": {"AutoExportPolicy": {"Events": ["NEW", "CHANGED", "DELETED"]}},
    }
    undescribed = lone._replace(aws=lone.aws._replace(file_system=None))
    fix = kv_export(undescribed).fix
    assert "set FSX_ID to the file system's id (aws fsx describe-file-systems) and BUCKET" in fix
    line = fix[fix.index("aws fsx create") :].replace("$FSX_ID", "fs-0123456789abcdef0")
    params = aws_request(line.replace("$BUCKET", "kv-export-bucket"))[1]
    validate("CreateDataRepositoryAssociation", params)
    assert params["FileSystemId"] == "fs-0123456789abcdef0"
