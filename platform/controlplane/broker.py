"""The embedded default's broker: kombu's filesystem transport, with every message written whole
before any worker can see it.

kombu's own `_put` creates a message's file under its final name and then writes it. A worker
scanning the folder in between moves the file away and reads it empty: it fails to decode it
(a `JSONDecodeError` that stops the worker) and the message, written afterwards into a file
already moved and deleted, is lost. Here a message is written under a name no queue reads and
then renamed, which is atomic on one filesystem.
"""

import contextlib
import os
import uuid
from time import monotonic

from kombu.exceptions import ChannelError
from kombu.transport import filesystem
from kombu.utils.encoding import str_to_bytes
from kombu.utils.json import dumps


class Channel(filesystem.Channel):
    def _put(self, queue, payload, **kwargs):
        # The name kombu's reader looks for (`<ms>_<uuid>.<queue>.msg`, oldest first); while it is
        # written, a leading dot and a suffix keep it out of every queue.
        name = f"{round(monotonic() * 1000)}_{uuid.uuid4()}.{queue}.msg"
        final = os.path.join(self.data_folder_out, name)
        partial = os.path.join(self.data_folder_out, f".{name}.part")
        try:
            with open(partial, "wb") as f:
                f.write(str_to_bytes(dumps(payload)))
            os.replace(partial, final)
        except OSError as exc:
            with contextlib.suppress(OSError):
                os.remove(partial)
            raise ChannelError(f"Cannot add file {final!r} to directory") from exc


class Transport(filesystem.Transport):
    Channel = Channel

