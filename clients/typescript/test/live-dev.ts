/**
 * The transport against the real `awaken-s3 dev` server, which tests/clients/test_node_live.py
 * starts on 127.0.0.1 (its URL, token and a file for the killed workers' pids in the
 * environment) and stops. The worker is SIGKILLed mid-answer through the dev server's kill
 * route; the message the AI SDK's reader assembled must be the committed turn exactly.
 */
import assert from "node:assert/strict";
import { appendFileSync } from "node:fs";
import { test } from "node:test";

import { readUIMessageStream } from "ai";
import { WebSocket } from "ws";

import { AwakenClient } from "../src/client.js";
import type { SocketLike } from "../src/client.js";
import { MemoryChatStore } from "../src/store.js";
import { AwakenChatTransport } from "../src/transport.js";
import type { AwakenUIMessage } from "../src/transport.js";

const url = process.env.AWAKEN_DEV_URL ?? "";
const token = process.env.AWAKEN_DEV_TOKEN ?? "";
const killedFile = process.env.AWAKEN_KILLED_FILE ?? "";

const texts = (message: AwakenUIMessage) =>
  message.parts.flatMap((part) => (part.type === "text" ? [part.text] : []));

test("a chat over awaken-s3 dev survives a killed worker", { skip: !url }, async () => {
  const client = new AwakenClient({
    baseUrl: url,
    socketUrl: url.replace("http://", "ws://") + "/ws",
    token,
    socket: (address) => new WebSocket(address) as unknown as SocketLike,
  });
  const transport = new AwakenChatTransport({ client, store: new MemoryChatStore() });
  const stream = await transport.sendMessages({
    trigger: "submit-message",
    chatId: "live-chat",
    messageId: undefined,
    messages: [{ id: "u1", role: "user", parts: [{ type: "text", text: "why?" }] }],
    abortSignal: undefined,
  });
  const runId = (await client.getThread("live-chat")).latest_run;
  assert.ok(runId);
  let killed = false;
  let last: AwakenUIMessage | undefined;
  const shown: string[] = [];
  for await (const message of readUIMessageStream<AwakenUIMessage>({ stream })) {
    last = message;
    const now = texts(message).join("");
    if (now !== shown[shown.length - 1]) shown.push(now);
    if (!killed && now.length >= 120) {
      killed = true;
      const kill: Response = await fetch(`${url}/dev/runs/${runId}/kill`, {
        method: "POST",
        headers: { authorization: `Bearer ${token}` },
      });
      assert.equal(kill.status, 200);
      const { killed: pids } = (await kill.json()) as { killed: number[] };
      appendFileSync(killedFile, pids.map((pid) => `${pid}\n`).join(""));
    }
  }
  assert.ok(killed, "the answer ended before the kill");
  assert.ok(last);
  const thread = await client.getThread("live-chat");
  const answer = thread.messages[1];
  assert.equal(answer?.role, "assistant");
  const committed = (answer?.content ?? [])
    .map((block) => (block.type === "text" ? String(block.text) : ""))
    .join("");
  // Exactly the committed turn; at every moment a prefix of it (nothing taken back).
  assert.deepEqual(texts(last), [committed]);
  for (const held of shown) assert.ok(committed.startsWith(held), "text was taken back");
  assert.equal(last.metadata?.status, "completed");
  assert.deepEqual(last.metadata?.plans, ["R1"]);
  const resumes = last.parts.filter((part) => part.type === "data-awaken-resumed");
  assert.equal(resumes.length, 1);
});
