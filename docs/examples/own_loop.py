"""Your own loop: stream one resumable turn to the terminal, then commit it to your history."""

import asyncio
import json
import sys

from awaken_s3 import FsStreamCheckpointStore, Message, ModelRequest, ScriptedProvider
from awaken_s3 import TextChunk, TurnResumed, open_turn
from awaken_s3.streaming.scripted import text_turn

STORY = " ".join(f"word{i}" for i in range(300)) + "."
model = ScriptedProvider([text_turn(STORY, chunk=8)], delay=0.02)  # or AnthropicProvider(...)


async def main(directory: str) -> None:
    history = [Message.user("Tell me a story.")]
    with FsStreamCheckpointStore(directory) as store:  # S3StreamCheckpointStore on AWS
        turn = open_turn(store, "story-1", model, ModelRequest("my-model", history))
        async for event in turn:
            if isinstance(event, TurnResumed):  # a rerun after a crash: the saved text first
                print(f"[{event.plan}] {event.text}", end="", flush=True)
            elif isinstance(event, TextChunk):
                print(event.text, end="", flush=True)
        await turn.commit(history.append)  # your history first, then the checkpoint goes
    print("\n" + json.dumps({"committed": history[-1].text}))


asyncio.run(main(sys.argv[1]))
