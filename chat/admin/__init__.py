"""Django admin for staff (docs/admin.md): every turn's citations and their targets, sessions, live turns.

Registered by importing each module: `logs` (the chat logs: counts, filters,
search, the citation tables of `display`), `sessions`, `live` (live turns).
All read-only (`readonly.ReadOnlyAdmin`) but for the log list's one action.
"""

from chat.admin import live, logs, sessions

__all__ = ["live", "logs", "sessions"]
