/**
 * The transport under the AI SDK's own chat machinery (`AbstractChat`, what `useChat` wraps),
 * with a plain in-memory chat state: a message sent, the page closed mid-answer, a new page
 * that resumes (`resumeStream`, as `useChat({ resume: true })` does on mount).
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { AbstractChat } from "ai";
import type { ChatInit, ChatState, ChatStatus } from "ai";
import { WebSocket } from "ws";

import { AwakenClient } from "../src/client.js";
import type { SocketLike } from "../src/client.js";
import { MemoryChatStore } from "../src/store.js";
import { AwakenChatTransport } from "../src/transport.js";
import type { AwakenUIMessage } from "../src/transport.js";
import { FakeAwaken, TOKEN } from "./fake-server.js";
import { committed, ended, following, text } from "./frames.js";

class MemoryState implements ChatState<AwakenUIMessage> {
  status: ChatStatus = "ready";
  error: Error | undefined = undefined;
  constructor(public messages: AwakenUIMessage[]) {}
  pushMessage = (message: AwakenUIMessage) => {
    this.messages = [...this.messages, message];
  };
  popMessage = () => {
    this.messages = this.messages.slice(0, -1);
  };
  replaceMessage = (index: number, message: AwakenUIMessage) => {
    this.messages = [...this.messages.slice(0, index), message, ...this.messages.slice(index + 1)];
  };
  snapshot = <T>(thing: T): T => structuredClone(thing);
}

class Chat extends AbstractChat<AwakenUIMessage> {
  readonly memory: MemoryState;
  constructor(init: ChatInit<AwakenUIMessage> & { messages: AwakenUIMessage[] }) {
    const memory = new MemoryState(init.messages);
    super({ ...init, state: memory });
    this.memory = memory;
  }
}

let server: FakeAwaken;
before(async () => {
  server = await new FakeAwaken().start();
});
after(async () => {
  await server.stop();
});

function transport(store: MemoryChatStore): AwakenChatTransport {
  const client = new AwakenClient({
    baseUrl: server.baseUrl,
    socketUrl: server.socketUrl,
    token: TOKEN,
    socket: (url) => new WebSocket(url) as unknown as SocketLike,
  });
  return new AwakenChatTransport({ client, store });
}

const texts = (message: AwakenUIMessage | undefined) =>
  (message?.parts ?? []).flatMap((part) => (part.type === "text" ? [part.text] : []));

test("a page closed mid-answer and opened again shows the answer once", async () => {
  const store = new MemoryChatStore();
  const first = new Chat({ id: "chat-sdk", transport: transport(store), messages: [] });
  const sending = first.sendMessage({ text: "Name three buckets" });
  const follow = await server.next();
  const run = String(follow.message.run_id);
  follow.connection.send(following(run), text(run, 0, 0, "alpha, "), text(run, 0, 7, "beta"));
  while (texts(first.messages[1]).join("") !== "alpha, beta") {
    await new Promise((resolve) => setImmediate(resolve));
  }
  // The page goes away: its chat stops, what it showed is what the app kept.
  await first.stop();
  await sending;
  const kept = structuredClone(first.messages);
  assert.deepEqual(
    kept.map((m) => [m.role, texts(m).join("")]),
    [
      ["user", "Name three buckets"],
      ["assistant", "alpha, beta"],
    ],
  );

  const second = new Chat({ id: "chat-sdk", transport: transport(store), messages: kept });
  const resuming = second.resumeStream();
  const again = await server.next();
  assert.deepEqual(again.message, { action: "follow", run_id: run, turn: 0, after: 11 });
  again.connection.send(
    following(run, 0, 11),
    // The worker that resumed re-sends from behind what the page holds.
    text(run, 0, 7, "beta, gamma"),
    committed(run, 0, "alpha, beta, gamma"),
    ended(run, "completed"),
  );
  await resuming;
  assert.equal(second.status, "ready");
  assert.deepEqual(
    second.messages.map((m) => [m.role, texts(m).join("")]),
    [
      ["user", "Name three buckets"],
      ["assistant", "alpha, beta, gamma"],
    ],
  );
  assert.equal(second.messages[1]?.id, kept[1]?.id, "the same assistant message, replaced");
  assert.equal(second.messages[1]?.metadata?.status, "completed");
  // Once ended, a later page has nothing to resume and the chat stays as it is.
  const third = new Chat({ id: "chat-sdk", transport: transport(store), messages: second.messages });
  await third.resumeStream();
  assert.equal(third.messages.length, 2);
});
