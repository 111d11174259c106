"""Benchmark: an answer rendered with its citations in place, against plain Markdown (docs/pages.md).

    .venv/bin/python bench/answers.py              # 1x and 8x the recorded overview answer, 20 runs each

The answer is the recorded overview (examples/recorded/30-markdown-overview.json:
579 characters, 5 citations in a nested list, bold, a table and a link) and
the same eight times over (4.6 KB, 40 citations), taking turns with:

- baseline: markdown-it-py's render of the same text in the same dialect,
  then nh3 with the same allowlist: the least any page showing Markdown
  safely must do;
- page: `render_answer` (where each shown character comes from, highlights,
  chip slots, sanitizing) and the chips put in by the template tag: what a
  session page does for each turn;
- preview: the same with `partial=True`, what each render of a streaming
  answer costs (`stable_markdown` parses the end of the answer again).

Each timed run renders the answer 16 times (twice for the long one); it
prints median and p95 per render and the page/baseline ratio (goal: at most
3). In-process: a page's turn costs this plus its share of the request.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench._timing import Timings, ratio_line, time_alternately  # noqa: E402

GOAL_RATIO = 3.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--repeat", type=int, nargs="+", default=[1, 8], help="copies of the overview answer")
    args = parser.parse_args()
    from bench._django import use_bench_settings

    use_bench_settings()
    import django

    django.setup()
    from pages.markdown import _sanitize, render_answer
    from pages.markdown_parser import markdown_parser
    from pages.templatetags.chips import answer as answer_tag
    from tests.markdown_answers import CARDS_SOURCE, DEADLINES_SOURCE, IRS_URL, overview_answer

    plain = markdown_parser()
    one, cited = overview_answer(
        {
            CARDS_SOURCE: {"kind": "accounts", "accounts": [{"accountId": "u8jzPde0IgxLd6GncfBAepfJBd0Kh8oOOL8dK"}]},
            IRS_URL: {"kind": "tax_reference", "url": IRS_URL},
            DEADLINES_SOURCE: {"kind": "tax_reference", "url": None},
        }
    )
    for copies in args.repeat:
        step = len(one) + 2  # ASCII only: str length = UTF-16 length
        text = "\n\n".join([one] * copies)
        inline = [dict(c, start=c["start"] + k * step, end=c["end"] + k * step) for k in range(copies) for c in cited]
        batch = max(1, 16 // copies)  # renders per timed run, so a run lasts long enough to time well

        def repeat(render, batch=batch):
            return lambda: [render() for _ in range(batch)]

        timed = time_alternately(
            {
                "baseline": repeat(lambda text=text: _sanitize(plain.render(text))),
                "page": repeat(
                    lambda text=text, inline=inline: answer_tag(
                        render_answer(text, inline, account_names={}), "chip-bench"
                    )
                ),
                "preview": repeat(
                    lambda text=text, inline=inline: answer_tag(
                        render_answer(text, inline, account_names={}, partial=True), "chip-live"
                    )
                ),
            },
            runs=args.runs,
        )
        for name in timed:  # per render
            timed[name] = Timings(tuple(run / batch for run in timed[name].runs))
        print(f"{len(text):,} characters, {len(inline)} citations ({args.runs} runs of {batch}, taking turns)")
        print(timed["baseline"].line("markdown-it-py + nh3 (baseline)"))
        print(timed["page"].line("render_answer + chips (a page's turn)"))
        print(timed["preview"].line("partial render + chips (a streaming step)"))
        print(ratio_line(timed["page"], timed["baseline"], goal=GOAL_RATIO, what="page/baseline"))


if __name__ == "__main__":
    main()
