"""A plan's one-line verdict, as kvfit and kvplan users expect it first: does every session fit
in HBM, on what, in which layout; and when it does not, what would make it fit, each "try"
planned again rather than guessed. A context that one node cannot serve at all (one session
over its 85% line, or weights that leave no room) is a verdict too (``rescue``), with the
tries that would serve it. Pure: the re-planning is a function passed in."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from kvtool.errors import InputError
from kvtool.plan.cluster import Hardware
from kvtool.plan.placement import TierPlan
from kvtool.plan.serving import Layout, Serving
from kvtool.profiles.hardware import NodeProfile


class DeploymentPlan(Protocol):
    """What a verdict reads of a plan (``deployment.DeploymentPlan``, which imports this)."""

    @property
    def tiers(self) -> TierPlan: ...

    @property
    def hardware(self) -> Hardware: ...

    @property
    def serving(self) -> Serving: ...

    @property
    def best_layout(self) -> Layout | None: ...


@dataclass(frozen=True)
class Try:
    """One change of the inputs (``options`` as typed) and what the plan then says."""

    options: tuple[str, ...]
    fits: bool
    sessions_in_t1: int
    hbm_utilization: float

    @property
    def text(self) -> str:
        outcome = "fits" if self.fits else f"{self.sessions_in_t1:,} in T1"
        return f"{' '.join(self.options)} ({outcome}, {self.hbm_utilization:.0%})"


@dataclass(frozen=True)
class Verdict:
    """Whether all ``sessions`` are in T1, the share of HBM's KV space they use, the cluster
    and layout, and the tries that would make a plan that does not fit fit."""

    fits: bool
    sessions: int
    sessions_in_t1: int
    hbm_utilization: float
    nodes: int
    node: str
    layout: str
    tries: tuple[Try, ...] = ()
    refused: str = ""  # why one node cannot serve a session ("": it can)

    @property
    def text(self) -> str:
        head = "fits" if self.fits else "does not fit"
        if self.refused:
            line = f"{head}: {self.refused}, {self.layout}"
        else:
            line = (
                f"{head}: {self.sessions_in_t1:,} of {self.sessions:,} sessions in T1"
                f" ({self.hbm_utilization:.0%} of HBM's KV space), {self.nodes} x {self.node},"
                f" {self.layout}"
            )
        if self.tries:
            line += "; try " + ", ".join(t.text for t in self.tries)
        return line


def _in_t1(plan: DeploymentPlan) -> tuple[int, float]:
    t1 = plan.tiers.tiers[0]
    return t1.sessions, t1.utilization or 0.0


def layout_text(plan: DeploymentPlan) -> str:
    """``tp 8 x pp 18`` (and data-parallel attention), as the plan serves."""
    return serving_text(plan.serving, plan.hardware)


def serving_text(serving: Serving, hardware: Hardware) -> str:
    """``tp 8 x pp 2 over 2 nodes`` (and data-parallel attention)."""
    text = f"tp {serving.tp}" + (f" x pp {serving.pp}" if serving.pp > 1 else "")
    if hardware.engine_nodes > 1:
        text += f" over {hardware.engine_nodes} nodes"
    return text + (" with data-parallel attention" if serving.dp_attention else "")


Replan = Callable[..., DeploymentPlan]


def judge(plan: DeploymentPlan, sessions: int, *, replan: Replan, fp8_possible: bool) -> Verdict:
    """``plan``'s verdict; when it does not fit, each try is ``replan`` with one change:
    ``kv_dtype="fp8"`` (when ``fp8_possible``), ``nodes`` (as many as HBM needs), and the
    layout that holds the most (``tp``, ``pp``) when the plan's is not it. A try the engine
    or the node refuses is left out."""
    in_t1, used = _in_t1(plan)
    verdict = Verdict(
        fits=plan.tiers.fits_in_t1, sessions=sessions, sessions_in_t1=in_t1,
        hbm_utilization=used, nodes=plan.hardware.nodes, node=plan.hardware.node.name,
        layout=layout_text(plan),
    )  # fmt: skip
    if verdict.fits:
        return verdict
    tries = []
    changes: list[tuple[tuple[str, ...], dict[str, object]]] = []
    if fp8_possible:
        changes.append((("--kv-dtype", "fp8"), {"kv_dtype": "fp8"}))
    span = plan.hardware.engine_nodes  # (the plan counts groups of nodes; --nodes, nodes)
    nodes = plan.tiers.nodes_for_all_in_t1 * span
    if nodes > plan.hardware.nodes * span:
        changes.append((("--nodes", str(nodes)), {"nodes": nodes}))
    best = plan.best_layout
    serving = plan.serving
    better = best is not None and best.sessions_in_t1_per_node > plan.tiers.sessions_per_node_in_t1
    if best is not None and better and (best.tp, best.pp) != (serving.tp, serving.pp):
        layout: dict[str, object] = {"tp": best.tp, "pp": best.pp}
        changes.append((("--tp", str(best.tp), "--pp", str(best.pp)), layout))
    for options, change in changes:
        try:
            other = replan(**change)
        except InputError:
            continue
        other_in_t1, other_used = _in_t1(other)
        tries.append(Try(options, other.tiers.fits_in_t1, other_in_t1, other_used))
    return Verdict(**{**verdict.__dict__, "tries": tuple(tries)})


MAX_PIPELINE_NODES = 16  # the longest pipeline across nodes a rescue tries


def rescue(
    refused: str,
    sessions: int,
    hardware: Hardware,
    serving: Serving,
    *,
    replan: Replan,
    fp8_possible: bool,
    layers: int,
    larger: Sequence[NodeProfile] = (),
) -> Verdict:
    """The verdict of a context that one node of ``hardware`` cannot serve (``refused`` says
    why), with the tries that would, each planned again by ``replan``: the pipeline over the
    fewest nodes that serves it (``serving``'s tp within a node, its stages on ``span``
    nodes); fp8 KV (``fp8_possible``: a narrower format, and a session, not the weights, over
    the line), alone where that serves it, else with the fewest nodes when that is no
    more; and the first node of ``larger`` (bundled nodes with more HBM: of the same maker,
    smallest first, then the others) that serves it. A try no plan serves is left out."""
    node = hardware.node
    tp = serving.tp

    def attempt(options: tuple[str, ...], **change: object) -> Try | None:
        try:
            other = replan(**change)
        except InputError:
            return None
        in_t1, used = _in_t1(other)
        return Try(options, other.tiers.fits_in_t1, in_t1, used)

    def fewest_nodes(prefix: tuple[str, ...], **change: object) -> tuple[int, Try] | None:
        for span in range(2, MAX_PIPELINE_NODES + 1):
            pp = span * node.chips // tp
            if pp > layers:
                return None
            nodes = span * -(-hardware.nodes // span)  # whole groups, at least the nodes given
            options = (*prefix, "--tp", str(tp), "--pp", str(pp), "--nodes", str(nodes))
            found = attempt(options, tp=tp, pp=pp, nodes=nodes, **change)
            if found is not None:
                return span, found
        return None

    tries = []
    pipeline = fewest_nodes(())
    if pipeline is not None:
        tries.append(pipeline[1])
    if fp8_possible:
        alone = attempt(("--kv-dtype", "fp8"), kv_dtype="fp8")
        if alone is not None:
            tries.append(alone)
        else:
            both = fewest_nodes(("--kv-dtype", "fp8"), kv_dtype="fp8")
            if both is not None and (pipeline is None or both[0] <= pipeline[0]):
                tries.append(both[1])
    vendor = node.accelerator.split()[0]  # a node of the same maker first (the same software)
    for other in sorted(larger, key=lambda n: (n.accelerator.split()[0] != vendor, n.hbm_bytes)):
        if other.hbm_bytes <= node.hbm_bytes // hardware.engine_nodes:
            continue
        found = attempt(("--hardware", (other.aliases or (other.name,))[0]), node=other)
        if found is not None:
            tries.append(found)
            break
    return Verdict(
        fits=False, sessions=sessions, sessions_in_t1=0, hbm_utilization=0.0,
        nodes=hardware.nodes, node=node.name, layout=serving_text(serving, hardware),
        tries=tuple(tries), refused=refused,
    )  # fmt: skip
