"""kombu's filesystem transport, with messages written atomically (the embedded broker; docs/job-engine.md).

kombu 5.7's `filesystem` transport creates a message file in the shared
folder, then locks it and writes it. A worker polling the folder moves and
reads files without taking that lock, so it can read a file the web process
has not written yet: the payload is empty and the worker's consumer dies on
a `JSONDecodeError` (seen in this project's tests on a loaded machine). Here
a message is written under a hidden name (which `_get` skips: it matches
`<name>.<queue>.msg` only) and renamed into place, atomic on one file system.
"""

from __future__ import annotations

import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> Any:  # type: ignore[override]  # as kombu's own
        """Put `payload` onto `queue`: write `.<name>.tmp`, then rename it to `<name>` (same name scheme as kombu)."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.tmp")
        try:
            with open(partial, "wb") as out:
                out.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
