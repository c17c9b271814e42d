"""What an implicit host->device copy is, from its own evidence (`TransferEvidence.origins`: bytes by origin, set
by the adapter): input data (the input pipeline, expected), or a copy the loop could avoid - arrays read back from
the device and sent again (a round trip), random values drawn on the host, values the loop builds on the host
(constants, Python lists). Pure logic: the `host_to_device_transfer` finding's wording for the avoidable kinds."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass

from ..model import fmt

ROUND_TRIP, HOST_RANDOM, HOST_MADE, DATA = "round_trip", "host_random", "host_made", "data"


def totals(events, weight=None) -> tuple[Counter, list[str]]:
    """Bytes by origin over some events, and what made the avoidable values (first few, as the events say).
    `weight(event)`: how many iterations' events it stands for (a long run's folded record), else one."""
    origins: Counter = Counter()
    made: list[str] = []
    for e in events:
        w = weight(e) if weight is not None else 1
        origins.update({k: v * w for k, v in (getattr(e.detail, "origins", None) or {}).items()})
        for m in getattr(e.detail, "made_by", None) or []:
            if m not in made and len(made) < 4:
                made.append(m)
    return origins, made


@dataclass
class Avoidable:
    """What the avoidable copies were (host_to_device_transfer's evidence adds it): bytes by origin, what made the
    values, the bytes copied per iteration that copied."""

    origins: dict[str, int]
    made_by: list[str]
    bytes_per_iteration: int


def message(events, at: str, hits: int, iterations: int, weight=None) -> tuple[str, Avoidable] | None:
    """The finding's text for copies most of whose bytes the loop could avoid, and evidence to add; None when the
    copies are data (or the adapter did not say). `weight`: as totals() takes it."""
    origins, made = totals(events, weight)
    avoid = {k: v for k, v in origins.items() if k != DATA and v}
    if not avoid:
        return None
    top = max(avoid, key=avoid.get)
    per = fmt.nbytes(sum(origins.values()) / max(1, hits))
    what = f" ({'; '.join(made)})" if made else ""
    eager = any(getattr(e.detail, "eager", False) for e in events)
    into = "uploaded outside any jitted function" if eager else "passed into a compiled call"
    if top == ROUND_TRIP:
        text = (f"Arrays read back from the device{what} are {into}{at} again in {hits} of {iterations} "
                f"iterations: a round trip (device -> host -> device, {per} each way per iteration), not input "
                "data. Keep them on the device: pass on the jax.Array the step returned, and read to the host only "
                "what is printed or saved.")
    elif top == HOST_RANDOM:
        text = (f"Random values drawn on the host{what} are {into}{at} in {hits} of {iterations} iterations "
                f"({per} per iteration): values the loop makes itself, not input data. Draw them on the device "
                "with jax.random (split a key each step and draw inside the jitted step).")
    else:
        text = (f"Values the loop builds on the host{what} are {into}{at} in {hits} of {iterations} iterations "
                f"({per} per iteration), not input data. Make them on the device (jnp inside the jitted function) "
                "or once before the loop.")
    return text, Avoidable(dict(origins), made, int(sum(origins.values()) / max(1, hits)))
