"""The turn registry: one meaning per source per turn (docs/registry.md).

A citation echoes only `source` and `title`, so within a turn a source must
mean one thing. The registry remembers, per source, the target it was first
written with, pools the accounts of repeated account writes, and leaves a
source untyped for good on any other disagreement.

An untyped source is stored as `None`. That is also what "poisoned" means:
once a source holds `None`, an equal write (`None`) changes nothing and any
typed write disagrees with it, so it stays `None` for the rest of the turn.
No separate sentinel is needed, and the checkpoint's `null` restores exactly
that state.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from citations.pooling import account_refs_of, accounts_target
from citations.targets import CitationTarget, parse_citation_target

__all__ = ["CHECKPOINT_KEY", "TurnRegistry"]

CHECKPOINT_KEY = "citationTargets"
"""The key of the registry inside a turn checkpoint (docs/registry.md)."""


class TurnRegistry:
    """Source -> target for one turn (docs/registry.md).

    Sources are strings; targets are `CitationTarget` or `None` (untyped).
    Iteration and `to_json()` keep first-write order.
    """

    __slots__ = ("_targets",)

    def __init__(self) -> None:
        self._targets: dict[str, CitationTarget | None] = {}

    def record(self, source: str, target: CitationTarget | None) -> None:
        """Write `target` for `source`, following the rules of docs/registry.md.

        First write: stored as is. Equal target: no change. Both
        `account`/`accounts`: accounts pooled (first-seen order, one ref per
        id, a null provider gives way to a known one; one account stays
        `account`, several become `accounts`). Anything else: the source is
        untyped for the rest of the turn.

        Raises `TypeError` when `source` is not a `str` or `target` is neither
        a `CitationTarget` nor `None` (a caller bug, not bad data).
        """
        if not isinstance(source, str):
            raise TypeError(f"source must be str, got {type(source).__name__}")
        if target is not None and not isinstance(target, CitationTarget):
            raise TypeError(f"target must be a CitationTarget or None, got {type(target).__name__}")
        if source not in self._targets:
            self._targets[source] = target
            return
        current = self._targets[source]
        if current == target:
            return
        current_refs = account_refs_of(current)
        new_refs = account_refs_of(target)
        if current_refs is not None and new_refs is not None:
            self._targets[source] = accounts_target(current_refs + new_refs)
        else:
            self._targets[source] = None

    def target_for(self, source: str) -> CitationTarget | None:
        """The target of `source`, or `None` when untyped or never written this turn."""
        return self._targets.get(source) if isinstance(source, str) else None

    def __contains__(self, source: object) -> bool:
        """Whether the turn wrote `source` (typed or not)."""
        return source in self._targets if isinstance(source, str) else False

    def __len__(self) -> int:
        return len(self._targets)

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TurnRegistry):
            return NotImplemented
        return self._targets == other._targets

    __hash__ = None  # type: ignore[assignment]  # mutable: unhashable (mypy types __hash__ as a method)

    def __repr__(self) -> str:
        return f"TurnRegistry({len(self._targets)} sources)"  # no targets: they hold account ids

    def to_json(self) -> dict[str, dict | None]:
        """The checkpoint's `citationTargets` value: `{source: target JSON or null}`."""
        return {source: None if target is None else target.to_json() for source, target in self._targets.items()}

    @classmethod
    def from_json(cls, value: object) -> TurnRegistry:
        """Resume from a `citationTargets` value; never raises.

        A non-object gives an empty registry. An entry whose target is null
        or malformed resumes as that source written untyped. Non-string keys
        (impossible in JSON) are skipped.
        """
        registry = cls()
        if isinstance(value, Mapping):
            for source, raw in value.items():
                if isinstance(source, str):
                    registry._targets[source] = parse_citation_target(raw)
        return registry

    @classmethod
    def from_checkpoint(cls, checkpoint: object) -> TurnRegistry:
        """Resume from a whole checkpoint object (reads `citationTargets`); never raises.

        A checkpoint that is not an object, or has no `citationTargets` key,
        resumes with an empty registry.
        """
        if not isinstance(checkpoint, Mapping):
            return cls()
        return cls.from_json(checkpoint.get(CHECKPOINT_KEY))
