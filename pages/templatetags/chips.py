"""`{% chip chip %}`: one citation chip, with a page-unique id for its popover."""

from __future__ import annotations

import itertools

from django import template
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from pages.presenters import Chip

register = template.Library()


@register.simple_tag(takes_context=True)
def chip(context: template.Context, value: Chip) -> SafeString:
    """Render `value` with `pages/_chip.html`; ids run `chip-1`, `chip-2`, … per page.

    The counter lives in the context (not the render context, which an
    `{% include %}` resets), created on first use.
    """
    counter = context.get("chip_ids")
    if counter is None:
        counter = itertools.count(1)
        context.dicts[0]["chip_ids"] = counter
    html = render_to_string("pages/_chip.html", {"chip": value, "dom_id": f"chip-{next(counter)}"})
    # Already escaped by the template; strip the file's trailing newline, which
    # the answer's `white-space: pre-wrap` would show as a line break.
    return mark_safe(html.strip())  # noqa: S308
