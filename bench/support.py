"""Benchmark: the CPU citation support (SPEC 15) costs a live turn, per citation.

    .venv/bin/python bench/support.py [--turns 600] [--rounds 7]

The turns are those of `examples/turns`, repeated (`bench.import_turns.derived_records`). Each is fed to the
turn assembler as a live turn feeds it (`citations.assembler.TurnAssembler`): each tool call whole, each model
step as deltas (its text in 12-character pieces, as the recorded model streams it, and its citations), the
way `live.model_step` does for the SDK's events. Two sides on the same inputs, taking turns over `--rounds`
rounds: the assembler as it is, and the same assembler with `support_of` answering None (no support computed).
Process CPU time (`time.process_time`), after a full garbage collection.

Prints each side's median with its range, the ratio, and the CPU per citation that support adds (the
difference of the medians over the citations fed). No goal: a figure to watch. Pure: no database.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import MIN_ROUNDS, Ratio, Timings  # noqa: E402

DELTA = 12  # characters per text delta, as devtools/recorded_stream.py streams them


def _feed(assembler: Any, events: Sequence[Any]) -> int:
    """Feed a validated record's events as a live turn does; the number of citations made."""
    from citations.turn import ToolCallEvent

    for event in events:
        if isinstance(event, ToolCallEvent):
            assembler.tool_call(event.name, event.input, event.output)
            continue
        assembler.start_step()
        for index, block in enumerate(event.message.get("content") or ()):
            if block.get("type") != "text":
                assembler.block_start(index, block)
                assembler.block_stop(index)
                continue
            assembler.block_start(index, {"type": "text", "text": ""})
            text = block.get("text") or ""
            for at in range(0, len(text), DELTA):
                assembler.text(index, text[at : at + DELTA])
            for citation in block.get("citations") or ():
                assembler.citation(index, citation)
            assembler.block_stop(index)
        assembler.end_step(event.message.get("model"))
    return len(assembler.result().inline_citations)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()  # citations.citable reads Django's slugify
    from bench.import_turns import derived_records
    from citations.assembler import TurnAssembler
    from citations.turn import parse_turn_record

    class WithoutSupport(TurnAssembler):
        def support_of(self, *args: Any) -> None:
            return None

    turns = [parse_turn_record(record, user_given=True).events for record in derived_records(args.turns)]
    citations = sum(_feed(TurnAssembler(), events) for events in turns)

    def run(cls: type[TurnAssembler]) -> float:
        gc.collect()
        started = time.process_time()
        for events in turns:
            _feed(cls(), events)
        return time.process_time() - started

    runs: dict[str, list[float]] = {"with support": [], "without support": []}
    sides = {"with support": TurnAssembler, "without support": WithoutSupport}
    for round_number in range(max(args.rounds, MIN_ROUNDS)):
        for name in list(sides) if round_number % 2 == 0 else list(sides)[::-1]:
            runs[name].append(run(sides[name]))
    with_support, without = Timings(tuple(runs["with support"])), Timings(tuple(runs["without support"]))
    print(f"support on the live path: {args.turns} turns fed as deltas, {citations} citations, process CPU")
    print(with_support.line("assembler, with support", width=30))
    print(without.line("assembler, support_of -> None", width=30))
    print(f"  with/without: {Ratio.of(with_support, without).text()}")
    extra = (with_support.median - without.median) / citations
    print(f"  support's CPU per citation: {extra * 1e6:.1f} us (median difference / citations)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
