"""Each measurement beside the spec of the same path, and what bounds it."""

from __future__ import annotations

from kvtool.bench.result import BenchResult
from kvtool.bench.run import BenchOptions, bench_notes, with_spec
from kvtool.bench.t3 import T3Options
from kvtool.profiles.load import load_node_profile, load_storage_profile

P5EN = load_node_profile("p5en")
FSX = load_storage_profile("fsx-lustre-persistent2")
S3 = load_storage_profile("s3-standard")


def _ok(tier: str, op: str, **fields: object) -> BenchResult:
    return BenchResult(tier=tier, op=op, status="ok", bytes_per_s=1e9, threads=32, **fields)  # type: ignore[arg-type]


def test_t3_over_tcp_names_the_100_gbps_ceiling() -> None:
    out = with_spec(
        _ok("t3", "seq_read", filesystem="lustre"), node=P5EN, t3=FSX, t4=S3, t3_path="ena"
    )
    assert out.spec_bytes_per_s == 100e9 / 8
    assert "this node reaches FSx over TCP: 100 Gbps ceiling" in out.limit
    assert out.ratio == 1e9 / (100e9 / 8)


def test_t3_over_efa_uses_the_efa_client_ceiling() -> None:
    out = with_spec(_ok("t3", "seq_read"), node=P5EN, t3=FSX, t4=S3, t3_path="efa")
    expected = min(FSX.client_efa_gbps * P5EN.instances, P5EN.efa_gbps)
    assert out.spec_bytes_per_s == expected * 1e9 / 8
    assert "over EFA" in out.limit


def test_a_gds_read_is_compared_with_the_gds_ceiling() -> None:
    out = with_spec(_ok("t3", "seq_read", variant="gds"), node=P5EN, t3=FSX, t4=S3, t3_path="ena")
    expected = min(FSX.client_efa_gds_gbps * P5EN.instances, P5EN.efa_gbps)
    assert out.spec_bytes_per_s == expected * 1e9 / 8


def test_a_folder_that_is_not_lustre_gets_no_fsx_spec() -> None:
    out = with_spec(_ok("t3", "seq_read", filesystem="ext4"), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s is None
    assert "ext4, not Lustre" in out.limit


def test_a_t3_folder_off_lustre_is_said_with_or_without_hardware() -> None:
    """``bench --tier t3 --t3-dir <ext4>`` gave believable T3 figures with no word that the
    folder is not on Lustre (issue 54): an unmounted /fsx is the root disk."""
    out = with_spec(_ok("t3", "seq_read", filesystem="ext4"), node=None, t3=None, t4=None)
    assert "ext4, not Lustre" in out.limit
    options = BenchOptions(tiers=("t3",), block_bytes=2**20, t3=T3Options(2**20), t3_dir="/fsx/kv")
    rows = [_ok("t3", "seq_read", filesystem="ext4"), _ok("t3", "seq_write", filesystem="ext4")]
    (note,) = bench_notes(rows, options)
    assert note.startswith("/fsx/kv is on a node-local ext4 file system (kvtool doctor FAILs it")
    assert "not FSx for Lustre: these are ext4's figures, not T3's" in note
    (shared,) = bench_notes([_ok("t3", "seq_read", filesystem="nfs4")], options)
    assert "nfs4, a shared file system, not FSx for Lustre" in shared
    assert bench_notes([_ok("t3", "seq_read", filesystem="lustre")], options) == []
    assert bench_notes([_ok("t3", "seq_read")], options) == []  # no mount table: nothing said


def test_few_threads_are_named_as_a_limit() -> None:
    result = _ok("t3", "seq_read")._replace(threads=4)
    assert "4 threads" in with_spec(result, node=P5EN, t3=FSX, t4=S3).limit


def test_t4_is_bound_by_connections_or_the_nic() -> None:
    few = with_spec(_ok("t4", "get")._replace(threads=8), node=P5EN, t3=FSX, t4=S3)
    assert few.spec_bytes_per_s == 8 * S3.per_connection_mbytes_per_s * 1e6
    many = with_spec(_ok("t4", "get")._replace(threads=100_000), node=P5EN, t3=FSX, t4=S3)
    assert many.spec_bytes_per_s == P5EN.ena_gbps * 1e9 / 8


def test_t1_against_the_hbm_peak_and_without_a_profile_no_spec() -> None:
    out = with_spec(_ok("t1", "d2d"), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s == P5EN.hbm_tbytes_per_s_per_chip * 1e12
    bare = with_spec(_ok("t1", "d2d"), node=None, t3=None, t4=None)
    assert bare.spec_bytes_per_s is None
    assert bare.ratio is None


def test_a_host_only_copy_has_no_link_spec() -> None:
    out = with_spec(_ok("t2", "copy", variant="host-only"), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s is None
    assert "host-only" in out.limit


def _t2(op: str = "h2d", **fields: object) -> BenchResult:
    from kvtool.bench.result import GpuId, PcieLink

    gpu = GpuId(0, "H200", link_now=PcieLink(5, 16), link_max=PcieLink(5, 16))
    fields.setdefault("gpu", gpu)
    fields.setdefault("gpus", 1)
    return _ok("t2", op, variant="pinned", **fields)


def test_a_t2_copy_is_held_to_its_gpus_own_pcie_link_without_a_profile() -> None:
    from kvtool.bench.result import GpuId, PcieLink

    out = with_spec(_t2(), node=None, t3=None, t4=None)
    assert out.spec_bytes_per_s == PcieLink(5, 16).bytes_per_s
    assert out.limit.startswith("GPU 0's PCIe Gen5 x16: 63.0 GB/s per direction after line coding")
    both = with_spec(_t2("bidir"), node=P5EN, t3=FSX, t4=S3)
    assert both.spec_bytes_per_s == 2 * PcieLink(5, 16).bytes_per_s
    assert "126.0 GB/s both ways" in both.limit
    slow = GpuId(3, "H200", link_now=PcieLink(4, 8), link_max=PcieLink(5, 16))
    out = with_spec(_t2(gpu=slow), node=P5EN, t3=FSX, t4=S3)
    assert "the link ran at Gen4 x8 after the copies: downtrained" in out.limit


def test_a_t2_copy_with_no_pcie_link_in_sysfs_is_held_to_the_profile() -> None:
    from kvtool.bench.result import GpuId

    c2c = GpuId(0, "GB200")
    out = with_spec(_t2(gpu=c2c), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s == P5EN.host_to_chip_gbytes_per_s * 1e9
    assert "sysfs shows no PCIe link for this GPU" in out.limit
    bare = with_spec(_t2(gpu=c2c), node=None, t3=None, t4=None)
    assert bare.spec_bytes_per_s is None
    assert bare.limit == "no PCIe link in sysfs and no --hardware: no spec"


def test_the_sum_over_all_gpus_is_held_to_that_many_chips_of_the_profile() -> None:
    out = with_spec(_t2(gpu=None, gpus=8), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s == 8 * P5EN.host_to_chip_gbytes_per_s * 1e9
    assert "(an estimate: chips may share PCIe switches)" in out.limit
    bare = with_spec(_t2(gpu=None, gpus=8), node=None, t3=None, t4=None)
    assert bare.spec_bytes_per_s is None


def test_a_gpus_share_of_a_gds_read_is_not_held_to_the_nodes_ceiling() -> None:
    out = with_spec(_ok("t3", "seq_read", variant="gds-gpu"), node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s is None
    assert "one GPU's share" in out.limit


def test_a_compat_gds_read_is_held_to_the_posix_path_not_gds() -> None:
    compat = with_spec(_ok("t3", "seq_read", variant="gds-compat"), node=P5EN, t3=FSX, t4=S3)
    posix = with_spec(_ok("t3", "seq_read"), node=P5EN, t3=FSX, t4=S3)
    assert compat.spec_bytes_per_s == posix.spec_bytes_per_s
    assert "crossed host memory" in compat.limit


def test_a_t2_row_from_an_older_kvtool_is_held_to_the_profile_per_chip() -> None:
    old = _ok("t2", "h2d", variant="pinned")  # no gpu, gpus 0: one GPU at a time, unnamed
    out = with_spec(old, node=P5EN, t3=FSX, t4=S3)
    assert out.spec_bytes_per_s == P5EN.host_to_chip_gbytes_per_s * 1e9
    assert out.limit.endswith("per direction per chip (a profile estimate)")
    assert with_spec(old, node=None, t3=None, t4=None) == old
