"""`{% answer rendered id_prefix %}`: a rendered answer with its chips, and its "Also cited:" line."""

from __future__ import annotations

import itertools
from typing import TYPE_CHECKING

from django import template
from django.template.loader import get_template
from django.utils.html import format_html
from django.utils.safestring import SafeString, mark_safe

from pages.presenters import Chip

if TYPE_CHECKING:
    from pages.markdown import AnswerHtml

register = template.Library()


@register.simple_tag
def answer(rendered: AnswerHtml, id_prefix: str) -> SafeString:
    """`<div class="answer">` with each chip where its slot is, then the stray chips' line, if any.

    Popover ids run `<id_prefix>-1`, `<id_prefix>-2`, … in document order, so
    one turn renders the same markup wherever it is rendered (its page, the
    fragment a live turn swaps in).
    """
    # Imported here: `manage.py check` loads every tag library, and markdown-it-py and nh3
    # should load with the first answer shown, not at start-up (tests/silvia/test_startup.py).
    from pages.markdown import ANSWER_MAX_CITATIONS, SLOT

    ids = (f"{id_prefix}-{n}" for n in itertools.count(1))
    chip_template = get_template("pages/_chip.html")  # looked up once: an answer may have a thousand chips

    def chips(values: tuple[Chip, ...]) -> str:
        # Already escaped by the template; stripped of the file's trailing newline.
        return "".join(chip_template.render({"chip": chip, "dom_id": next(ids)}).strip() for chip in values)

    # `rendered.html` is nh3's output; the chips' markup comes from the template.
    body = SLOT.sub(lambda match: chips(rendered.slots[int(match[1])]), rendered.html)
    html = format_html('<div class="answer">{}</div>', mark_safe(body))  # noqa: S308
    if rendered.stray:
        stray = mark_safe(chips(rendered.stray))  # noqa: S308
        html += format_html('<p class="stray"><span class="stray__label">Also cited:</span> {}</p>', stray)
    if rendered.more:
        html += format_html(
            '<p class="stray">{} more {} not shown (an answer shows its first {}).</p>',
            f"{rendered.more:,}",
            "citation is" if rendered.more == 1 else "citations are",
            f"{ANSWER_MAX_CITATIONS:,}",
        )
    return html
