/**
 * AwakenChatTransport read by the AI SDK's own UI message stream reader (`readUIMessageStream`
 * of the real `ai` package), against the fake server of fake-server.ts on 127.0.0.1.
 */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { readUIMessageStream } from "ai";
import type { UIMessage, UIMessageChunk } from "ai";
import { WebSocket } from "ws";

import { AwakenClient } from "../src/client.js";
import type { SocketLike } from "../src/client.js";
import { MemoryChatStore } from "../src/store.js";
import { AwakenChatTransport } from "../src/transport.js";
import type { AwakenUIMessage } from "../src/transport.js";
import { FakeAwaken, TOKEN } from "./fake-server.js";
import type { Received } from "./fake-server.js";
import { committed, ended, following, resumed, text, toolCall } from "./frames.js";

let server: FakeAwaken;
before(async () => {
  server = await new FakeAwaken().start();
});
after(async () => {
  await server.stop();
});

let ids = 0;
function client(): AwakenClient {
  return new AwakenClient({
    baseUrl: server.baseUrl,
    socketUrl: server.socketUrl,
    token: () => TOKEN,
    socket: (url) => new WebSocket(url) as unknown as SocketLike,
  });
}

function transport(store = new MemoryChatStore()): AwakenChatTransport {
  return new AwakenChatTransport({ client: client(), store, newId: () => `id-${++ids}` });
}

function userMessage(content: string): AwakenUIMessage {
  return { id: `u-${++ids}`, role: "user", parts: [{ type: "text", text: content }] };
}

function send(chat: AwakenChatTransport, chatId: string, content: string) {
  return chat.sendMessages({
    trigger: "submit-message",
    chatId,
    messageId: undefined,
    messages: [userMessage(content)],
    abortSignal: undefined,
  });
}

/** Every state of the message the SDK's reader builds, and the errors it reported. */
async function read(stream: ReadableStream<UIMessageChunk>) {
  const errors: string[] = [];
  let last: UIMessage | undefined;
  const reader = readUIMessageStream<AwakenUIMessage>({
    stream,
    onError: (error) => errors.push(String((error as Error).message)),
  });
  for await (const message of reader) last = message;
  assert.ok(last, "the stream made no message");
  return { message: last as AwakenUIMessage, errors };
}

function textOf(message: AwakenUIMessage): string[] {
  return message.parts.flatMap((part) => (part.type === "text" ? [part.text] : []));
}

/** The follow the client sends next, after answering it with the `following` frame. */
async function nextFollow(runId: string): Promise<Received> {
  const received = await server.next();
  assert.equal(received.message.action, "follow");
  assert.equal(received.message.run_id, runId);
  received.connection.send(following(runId));
  return received;
}

test("a run with text, a tool call and its result becomes one assistant message", async () => {
  const chat = transport();
  const stream = await send(chat, "chat-tools", "What is the weather in Paris?");
  const run = server.threads.get("chat-tools")?.latest_run;
  assert.ok(run);
  assert.deepEqual(server.runs.get(run)?.message_count, 1);
  const created = server.requests.filter((r) => r.method === "POST");
  assert.deepEqual(
    created.map((r) => [r.path, r.body, r.auth]),
    [
      ["/threads", { thread_id: "chat-tools" }, `Bearer ${TOKEN}`],
      [
        "/threads/chat-tools/runs",
        { message: "What is the weather in Paris?", run_id: run },
        `Bearer ${TOKEN}`,
      ],
    ],
  );
  const reading = read(stream);
  const { connection, message } = await nextFollow(run);
  assert.deepEqual(message, { action: "follow", run_id: run });
  const input = { city: "Paris", note: "ünïcödé 🌍" };
  connection.send(
    text(run, 0, 0, "Let me "),
    text(run, 0, 7, "check."),
    // The input arrives in pieces of 5 code points, the emoji one of them.
    ...toolCall(run, 0, 0, "call_0", "weather", input, 5),
    ...toolCall(run, 0, 1, "call_1", "forecast", { days: 3 }),
  );
  // The tool ran and the turn was committed: the thread holds the call and its result.
  const thread = server.threads.get("chat-tools");
  assert.ok(thread);
  thread.messages.push(
    {
      role: "assistant",
      content: [
        { type: "text", text: "Let me check." },
        { type: "tool_use", id: "call_0", name: "weather", input },
        { type: "tool_use", id: "call_1", name: "forecast", input: { days: 3 } },
      ],
    },
    {
      role: "user",
      content: [
        { type: "tool_result", tool_use_id: "call_0", content: "18°C", is_error: false },
        { type: "tool_result", tool_use_id: "call_1", content: "no forecast", is_error: true },
      ],
    },
    { role: "assistant", content: [{ type: "text", text: "It is 18°C." }] },
  );
  Object.assign(server.runs.get(run) ?? {}, { turn: 2, message_count: 4, status: "completed" });
  connection.send(
    committed(run, 0, "Let me check.", 2),
    text(run, 1, 0, "It is 18°C."),
    committed(run, 1, "It is 18°C."),
    ended(run, "completed"),
  );
  const { message: assistant, errors } = await reading;
  assert.deepEqual(errors, []);
  assert.equal(assistant.role, "assistant");
  assert.deepEqual(textOf(assistant), ["Let me check.", "It is 18°C."]);
  const tools = assistant.parts.filter((part) => part.type === "dynamic-tool");
  assert.equal(tools.length, 2);
  const failed = tools[1];
  assert.ok(failed && failed.type === "dynamic-tool");
  assert.deepEqual(
    [failed.toolName, failed.state, failed.input, failed.errorText],
    ["forecast", "output-error", { days: 3 }, "no forecast"],
  );
  const tool = tools[0];
  assert.ok(tool && tool.type === "dynamic-tool");
  assert.equal(tool.toolName, "weather");
  assert.equal(tool.state, "output-available");
  assert.deepEqual(tool.input, input);
  assert.equal(tool.state === "output-available" ? tool.output : undefined, "18°C");
  assert.equal(assistant.metadata?.status, "completed");
  assert.equal(assistant.metadata?.runId, run);
  const turns = assistant.parts.flatMap((p) => (p.type === "data-awaken-turn" ? [p.data] : []));
  assert.deepEqual(turns, [
    { turn: 0, textLength: 13, toolCalls: 2 },
    { turn: 1, textLength: 11, toolCalls: 0 },
  ]);
  // The chat's run has ended: a page that comes back has nothing to resume.
  assert.equal(await chat.reconnectToStream({ chatId: "chat-tools" }), null);
});

test("a worker killed mid-text: the resumed worker's overlapping text is shown once", async () => {
  const chat = transport();
  const stream = await send(chat, "chat-kill", "Tell me a story");
  const run = server.threads.get("chat-kill")?.latest_run ?? "";
  const reading = read(stream);
  const first = await nextFollow(run);
  first.connection.send(text(run, 0, 0, "Once upon "), text(run, 0, 10, "a time"));
  // The worker dies; its network with it: the connection drops without a close.
  first.connection.drop();
  const again = await nextFollow(run);
  // The client follows again from exactly what it holds.
  assert.deepEqual(again.message, { action: "follow", run_id: run, turn: 0, after: 16 });
  // The new worker resumes with R1 and re-sends from the position the follow had recorded
  // (10), behind what the client holds; then its own continuation.
  again.connection.send(
    resumed(run, 0, "R1", 1),
    text(run, 0, 10, "a time there"),
    text(run, 0, 22, " was a bucket."),
    // at a run's end the socket handler and the worker may both send the rest
    committed(run, 0, "Once upon a time there was a bucket."),
    committed(run, 0, "Once upon a time there was a bucket."),
    ended(run, "completed"),
    ended(run, "completed"),
  );
  const { message, errors } = await reading;
  assert.deepEqual(errors, []);
  assert.deepEqual(textOf(message), ["Once upon a time there was a bucket."]);
  const resumes = message.parts.flatMap((p) => (p.type === "data-awaken-resumed" ? [p.data] : []));
  assert.deepEqual(resumes, [{ turn: 0, plan: "R1", retryCount: 1 }]);
  assert.deepEqual(message.metadata?.plans, ["R1"]);
  const saved = await chat.store.get("chat-kill");
  // "a time" came twice; the second turn_committed and run_ended changed nothing.
  assert.equal(saved?.state.repeated, 6);
});

test("a fresh transport holding only the chat id resumes the active run", async () => {
  // A page that kept nothing: it creates the run, reads part of it, and is closed.
  const before = transport();
  const stream = await send(before, "chat-refresh", "Count to five");
  const run = server.threads.get("chat-refresh")?.latest_run ?? "";
  const reader = stream.getReader();
  const first = await nextFollow(run);
  first.connection.send(text(run, 0, 0, "one two"));
  while ((await reader.read()).value?.type !== "text-delta");
  await reader.cancel();
  Object.assign(server.runs.get(run) ?? {}, { status: "running" });

  const after = transport(new MemoryChatStore());
  const resumedStream = await after.reconnectToStream({ chatId: "chat-refresh" });
  assert.ok(resumedStream, "the active run was not found from the chat id");
  const reading = read(resumedStream);
  const again = await nextFollow(run);
  // It holds nothing of the run: it asks for the run from its first turn.
  assert.deepEqual(again.message, { action: "follow", run_id: run, turn: 0, after: 0 });
  again.connection.send(
    text(run, 0, 0, "one two three"),
    committed(run, 0, "one two three"),
    text(run, 1, 0, "four five"),
    committed(run, 1, "four five"),
    ended(run, "completed"),
  );
  const { message } = await reading;
  assert.deepEqual(textOf(message), ["one two three", "four five"]);
});

test("a page refresh with a kept store follows on from its offsets", async () => {
  const store = new MemoryChatStore();
  const before = transport(store);
  const stream = await send(before, "chat-kept", "Spell awaken");
  const run = server.threads.get("chat-kept")?.latest_run ?? "";
  const reader = stream.getReader();
  const first = await nextFollow(run);
  first.connection.send(text(run, 0, 0, "a-w-"), committed(run, 0, "a-w-"), text(run, 1, 0, "a-"));
  let deltas = 0;
  while (deltas < 2) if ((await reader.read()).value?.type === "text-delta") deltas++;
  await reader.cancel();

  const after = transport(store);
  const resumedStream = await after.reconnectToStream({ chatId: "chat-kept" });
  assert.ok(resumedStream);
  const reading = read(resumedStream);
  const again = await nextFollow(run);
  assert.deepEqual(again.message, { action: "follow", run_id: run, turn: 1, after: 2 });
  again.connection.send(
    text(run, 1, 0, "a-k-e-n"),
    committed(run, 1, "a-k-e-n"),
    ended(run, "completed"),
  );
  const { message } = await reading;
  // The replay of what was kept, then the rest: each character once.
  assert.deepEqual(textOf(message), ["a-w-", "a-k-e-n"]);
});

test("a cancel goes through the socket and ends the message as cancelled", async () => {
  const chat = transport();
  const stream = await send(chat, "chat-cancel", "Write a long essay");
  const run = server.threads.get("chat-cancel")?.latest_run ?? "";
  const reading = read(stream);
  const first = await nextFollow(run);
  first.connection.send(text(run, 0, 0, "Essay: "));
  await chat.cancel("chat-cancel");
  const cancel = await server.next();
  assert.deepEqual(cancel.message, { action: "cancel", run_id: run });
  cancel.connection.send({ type: "cancel", run_id: run, status: "cancelled" }, ended(run, "cancelled"));
  const { message, errors } = await reading;
  assert.deepEqual(errors, []);
  assert.equal(message.metadata?.status, "cancelled");
  assert.deepEqual(textOf(message), ["Essay: "]);
  // Without a follow, the cancel goes through the HTTP API.
  await chat.cancel("chat-cancel");
  const last = server.requests[server.requests.length - 1];
  assert.deepEqual([last?.method, last?.path], ["POST", `/runs/${run}/cancel`]);
});

test("a failed run reports its failure code as the stream's error", async () => {
  const chat = transport();
  const stream = await send(chat, "chat-fail", "Hello");
  const run = server.threads.get("chat-fail")?.latest_run ?? "";
  const reading = read(stream);
  const first = await nextFollow(run);
  const error = { code: "throttled", message: "the model provider throttled the request" };
  first.connection.send(text(run, 0, 0, "Hi"), ended(run, "failed", error));
  const { message, errors } = await reading;
  assert.deepEqual(errors, ["throttled: the model provider throttled the request"]);
  assert.deepEqual(message.metadata?.error, error);
  assert.equal(message.metadata?.status, "failed");
});

test("a chat with no thread or no active run has nothing to resume", async () => {
  assert.equal(await transport().reconnectToStream({ chatId: "never-created" }), null);
  await client().createThread({ thread_id: "empty-chat" });
  assert.equal(await transport().reconnectToStream({ chatId: "empty-chat" }), null);
});
