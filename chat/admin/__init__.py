"""Django admin for staff (docs/admin.md): every turn's citations and their targets, and the sessions.

Registered by importing each module: `logs` (the chat logs: counts, filters,
search, the citation tables of `display`) and `sessions`. Live turns have
their own admin, `live.admin`.
All read-only (`readonly.ReadOnlyAdmin`) but for the log list's one action.
"""

from chat.admin import logs, sessions

__all__ = ["logs", "sessions"]
