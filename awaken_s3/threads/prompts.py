"""System prompts kept apart from their run items, cached per process (pure, no I/O).

A settings item is written once with its run and never changed, so a prompt read once serves
every later decode of that run's item (the worker's claim, renewals and re-reads, the API's
polls), bounded by the bytes held. Shared by every DynamoDB store of the process, by
(table, run id).
"""

from __future__ import annotations

import threading
from collections import OrderedDict


class SystemPrompts:
    def __init__(self, max_bytes: int = 4 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self._held = 0
        self._prompts: OrderedDict[tuple[str, str], str] = OrderedDict()
        # Stores on several threads' loops may share it (tests, local servers).
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> str | None:
        with self._lock:
            prompt = self._prompts.get(key)
            if prompt is not None:
                self._prompts.move_to_end(key)
            return prompt

    def put(self, key: tuple[str, str], prompt: str) -> None:
        with self._lock:
            if key in self._prompts or len(prompt) > self.max_bytes:
                return
            self._prompts[key] = prompt
            self._held += len(prompt)
            while self._held > self.max_bytes:
                _, dropped = self._prompts.popitem(last=False)
                self._held -= len(dropped)

    def clear(self) -> None:
        with self._lock:
            self._prompts.clear()
            self._held = 0


#: the process's cache
SYSTEM_PROMPTS = SystemPrompts()
