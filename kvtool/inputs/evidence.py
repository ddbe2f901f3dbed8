"""What was measured, as the plan's own types: ``kvtool bench --json`` and ``kvtool doctor
--json`` files, each read and parsed here once (``kvtool plan --bench``, ``kvtool check``'s
``measured:``, ``kvtool doctor --merge``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from kvtool.errors import InputError
from kvtool.files import read_report

if TYPE_CHECKING:
    from kvtool.bench.result import BenchResult
    from kvtool.findings import Report
    from kvtool.plan.measured import MeasuredTier


class BenchReport(NamedTuple):
    """A ``kvtool bench --json`` file's measurements, or a ``kvtool capacity --json`` file's
    T3 restores (``restores``)."""

    source: str
    results: tuple[BenchResult, ...]
    restores: MeasuredTier | None = None

    def measured(self, *, chips: int) -> tuple[MeasuredTier, ...]:
        """The T2, T3 and T4 figures a plan can use in place of the spec, for a node of
        ``chips`` accelerators (``bench.measured``)."""
        from kvtool.bench.measured import measured_tiers

        if self.restores is not None:
            return (self.restores,)
        return measured_tiers(self.results, chips=chips)


def read_bench(path: Path) -> BenchReport:
    """A ``kvtool bench --json`` or ``kvtool capacity --json`` report; InputError for a file
    that is neither."""
    from kvtool.bench.measured import capacity_t3
    from kvtool.bench.result import results_from_json

    data = read_report(path, command="bench", also=("capacity",))
    command = data.get("command", "bench")
    try:
        if command == "capacity":
            return BenchReport(str(path), (), capacity_t3(data))
        return BenchReport(str(path), tuple(results_from_json(data)))
    except ValueError as exc:
        raise InputError(
            f"{path}: not a kvtool {command} --json report: {exc}",
            f"pass the file kvtool {command} --json wrote",
        ) from None


def read_doctor_report(path: Path) -> Report:
    """A ``kvtool doctor --json`` report; InputError naming the file for anything else."""
    from kvtool.doctor.run import report_from_json

    data = read_report(path, command="doctor")
    return report_from_json(data, source=str(path))
