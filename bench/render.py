"""Benchmark: the answer renderer's CPU time grows linearly, and its bounds hold (issue 36, docs/pages.md#bounds).

    .venv/bin/python bench/render.py                      # growth at 1x, 10x, 100x; the worst inputs allowed
    .venv/bin/python bench/render.py --code /work/base    # the same script against another checkout (before)

In-process, no database, CPU seconds of this process (`time.process_time`, so
other jobs on the machine count less), the fastest of `--runs` renders (the
least disturbed by other jobs sharing the cores):

- **Growth.** Each series renders at 1x, 10x and 100x of the answer's length
  or of its citations, as a session page does (`render_answer` and the chips
  of the template tag) and as a streaming step does (`partial=True`, what
  `POST /chat/answer-preview/` runs). Linear growth is a factor of about 10
  from one scale to the next; the line says `superlinear` past 15. The
  Markdown series stay within `ANSWER_MARKDOWN_MAX_CHARS` (16,384: 160, 1,600
  and 16,000 characters); the plain-text series goes past it, up to the
  preview's 262,144.
- **The worst allowed.** The attacker's inputs of issue 36 as they came (a
  240,000-character table row, 10,000 citations over inline Markdown, 131,000
  `*a`), and each costly construct filled to exactly the Markdown bound with
  10,000 citations (1,000 shown). Goal: each render well under 1 s of CPU.

A render is stopped after `--max-seconds` (a wall-clock timer) and shown
as `>N`, and the next scale of its series is not run: before issue 36 some
took minutes.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import signal
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

GOAL_SECONDS = 1.0
LINEAR = 15.0  # a factor of 10 in size costing more than this much more time is called superlinear

Case = Callable[[int], tuple[str, list[dict[str, object]]]]


def _cite(n: int, start: int, end: int) -> dict[str, object]:
    return {
        "source": f"https://e.example/{n}",
        "title": f"Source {n}",
        "cited_text": "cited",
        "start": start,
        "end": end,
    }


def _spread(text: str, count: int, width: int = 5) -> list[dict[str, object]]:
    """`count` citations of `width` characters spread over `text` (ASCII: UTF-16 offsets are indices)."""
    room = max(1, len(text) - width)
    return [_cite(n, (n * 7919) % room, (n * 7919) % room + width) for n in range(count)]


def _fill(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars]


def series(overview: str) -> dict[str, tuple[Case, list[int]]]:
    """name -> (make an answer at a scale, the three scales)."""
    markdown = [160, 1_600, 16_000]
    return {
        "overview answer, length (5 citations)": (
            lambda n: (_fill(overview + "\n\n", n), _spread(_fill(overview, n), 5)),
            markdown,
        ),
        "16,000 characters, citations": (
            lambda n: (_fill(overview + "\n\n", 16_000), _spread(_fill(overview, 16_000), n)),
            [10, 100, 1_000],
        ),
        "table rows `|a|b|`": (lambda n: ("|a|b|\n|-|-|\n" + _fill("|a|b|\n", n - 12), []), markdown),
        "a header row of cells `|a`": (lambda n: ("|a" * (n // 4) + "\n" + "|-" * (n // 4), []), markdown),
        "`*a`": (lambda n: (_fill("*a", n), []), markdown),
        "`[`": (lambda n: ("[" * n, []), markdown),
        "list items `- a`": (lambda n: (_fill("- a\n", n), []), markdown),
        "inline Markdown, a citation per 16 characters": (
            lambda n: (
                _fill("**bold** _em_ `code` [link](https://e.example) ", n),
                _spread(_fill("**b** ", n), n // 16),
            ),
            markdown,
        ),
        "plain text past the bound, a citation per 262 characters": (
            lambda n: (_fill("Plain words, *a [b `c | d\n", n), _spread(_fill("x", n), n // 262)),
            [2_621, 26_214, 262_144],
        ),
    }


def worst(bound: int) -> dict[str, tuple[str, list[dict[str, object]]]]:
    """The attacker's inputs of issue 36 as they came, and each costly construct filled to the bound."""
    table_row = "|a" * 60_000 + "\n" + "|-" * 60_000
    inline_md = _fill("**bold** _em_ `code` [link](https://e.example) ", 262_144)
    cases = {
        "issue 36: a 240,000-character table row": (table_row, []),
        "issue 36: 10,000 citations over inline Markdown": (inline_md, _spread(inline_md, 10_000)),
        "issue 36: 131,000 `*a`": ("*a" * 131_000, []),
    }
    for name, unit in [
        ("table rows", "|a|b|\n"),
        ("header cells", "|a"),
        ("list items", "- a\n"),
        ("line breaks", "a\n"),
        ("`*a`", "*a"),
        ("`[`", "["),
        ("links to a reference", "[a] "),
        ("ordered items", "1. a\n"),
        ("unclosed links", "[a](b"),
    ]:
        if unit == "|a":
            text = "|a" * (bound // 4) + "\n" + "|-" * (bound // 4 - 1)
        elif unit == "|a|b|\n":
            text = "|a|b|\n|-|-|\n" + _fill(unit, bound - 12)
        elif unit == "[a] ":
            text = "[a]: https://e.example\n\n" + _fill(unit, bound - 24)
        else:
            text = _fill(unit, bound)
        cases[f"{name} to the bound, 10,000 citations"] = (text[:bound], _spread(text[:bound], 10_000))
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="renders per figure (median)")
    parser.add_argument("--max-seconds", type=float, default=20.0, help="skip the next scale past this")
    parser.add_argument("--code", type=Path, default=ROOT, help="the checkout whose renderer is timed")
    parser.add_argument("--only", choices=["growth", "worst"], default=None)
    args = parser.parse_args()
    sys.path.insert(0, str(args.code.resolve()))
    sys.path.insert(1, str(ROOT))
    os.chdir(args.code)
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()
    import pages.markdown
    from pages.markdown import render_answer
    from pages.templatetags.chips import answer as answer_tag
    from tests.markdown_answers import overview_answer

    bound = getattr(pages.markdown, "ANSWER_MARKDOWN_MAX_CHARS", 16_384)
    shown = getattr(pages.markdown, "ANSWER_MARKDOWN_MAX_CHARS", "none")
    print(f"renderer of {args.code.resolve()} (Markdown bound: {shown})")
    render_answer("warm *up*", [], account_names={})

    def stop(signum: int, frame: object) -> None:
        raise TimeoutError

    signal.signal(signal.SIGALRM, stop)

    def cpu(text: str, inline: list[dict[str, object]], partial: bool) -> float:
        """The fastest render's CPU seconds, chips included; inf when one took over `--max-seconds`."""
        times = []
        for _ in range(args.runs):
            # A wall-clock stop: while a CPU timer (ITIMER_PROF) is armed Linux counts CPU time in ticks (4 ms).
            start = time.process_time()
            signal.setitimer(signal.ITIMER_REAL, args.max_seconds)
            try:
                answer_tag(render_answer(text, inline, account_names={}, partial=partial), "chip-bench")
            except TimeoutError:
                return math.inf
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0)
            times.append(time.process_time() - start)
        return min(times)

    def seconds(value: float) -> str:
        return f">{args.max_seconds:.0f}" if math.isinf(value) else f"{value:.3f}"

    if args.only in (None, "growth"):
        print("\nGrowth: CPU ms per render at 1x / 10x / 100x (factor from one scale to the next; linear is ~10)")
        for name, (make, scales) in series(overview_answer({})[0]).items():
            for partial in (False, True):
                figures: list[float] = []
                for scale in scales:
                    if figures and math.isinf(figures[-1]):
                        break
                    figures.append(cpu(*make(scale), partial))
                cells = "  ".join(
                    f"{scale:>7,}: "
                    + (f"{'>' + str(round(args.max_seconds * 1000)):>9}" if math.isinf(ms) else f"{ms * 1000:9.2f}")
                    for scale, ms in zip(scales, figures, strict=False)
                )
                factors = [b / a if a else math.inf for a, b in itertools.pairwise(figures)]
                verdict = "superlinear" if any(f > LINEAR for f in factors) else "linear"
                if math.isinf(figures[-1]):
                    verdict = f"stopped: over {args.max_seconds:.0f} s"
                print(
                    f"  {name:<56} {'preview' if partial else 'page   '}  {cells}   "
                    f"x{' x'.join(f'{f:.1f}' for f in factors)}  {verdict}"
                )

    if args.only in (None, "worst"):
        print(f"\nThe worst allowed: CPU s per render (goal: well under {GOAL_SECONDS:.0f} s)")
        for name, (text, inline) in worst(bound).items():
            figures = [cpu(text, inline, partial) for partial in (False, True)]
            met = "met" if max(figures) < GOAL_SECONDS else "NOT MET"
            print(
                f"  {name:<56} {len(text):>7,} chars {len(inline):>6,} citations   page {seconds(figures[0]):>7} s   "
                f"preview {seconds(figures[1]):>7} s   {met}"
            )


if __name__ == "__main__":
    main()
