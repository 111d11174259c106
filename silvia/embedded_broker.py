"""kombu's filesystem transport, with each message written whole before it appears (the embedded broker;
docs/job-engine.md).

kombu 5.7's filesystem `Channel._put` opens the message file under its final
name in the shared folder, then locks it and writes it. A consumer's `_get`
lists the folder, sorts the names, takes the first whose text after its
first dot is exactly `<queue>.msg`, moves it away and reads it, without the
lock: it can take a file that is still empty, and the worker's consumer dies
on a `JSONDecodeError` (seen in this project's tests on a loaded machine).
None of the transport's options changes that: `data_folder_in` and
`data_folder_out` must be one folder for a message to arrive, and
`store_processed`/`processed_folder` only say where a taken file goes.

So `_put` is replaced, and only it: the message is written in the folder's
`.incoming/` subfolder (the same file system) and renamed into the folder
under kombu's own name scheme. A rename is atomic, so a consumer sees either
no file or the whole one. The consumer never looks inside `.incoming/`, and
the folder's entry `.incoming` can match no queue's `<queue>.msg` (by
kombu 5.7's exact match or by an older kombu's substring test).
`_put` is the method kombu's `virtual.AbstractChannel` asks every virtual
transport to implement; overriding it is the one use of a kombu name with an
underscore in this project (docs/decisions.md, "The embedded broker writes
its own messages"). `tests/test_embedded_broker.py` holds a rename
mid-way and puts and gets many messages at once across processes.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from time import monotonic
from typing import Any

from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps

__all__ = ["INCOMING", "Channel", "Transport"]

#: The subfolder of the broker's folder where a message is written before it is renamed in.
INCOMING = ".incoming"


class Channel(filesystem.Channel):
    def _put(self, queue: Any, payload: Any, **kwargs: Any) -> None:  # type: ignore[override]  # as kombu's own
        """Put `payload` onto `queue`: write it in `.incoming/`, then rename it to `<ms>_<uuid>.<queue>.msg`."""
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        incoming = os.path.join(self.data_folder_out, INCOMING)
        partial = os.path.join(incoming, name)  # unique (its uuid); created with kombu's permissions (the umask)
        try:
            os.makedirs(incoming, exist_ok=True)
            try:
                with open(partial, "xb") as out:
                    out.write(str_to_bytes(dumps(payload)))
                os.replace(partial, final)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.unlink(partial)
                raise
        except OSError as exc:
            raise filesystem.ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel
