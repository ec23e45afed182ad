/** AwakenClient alone: HTTP errors, socket refusals, a socket that keeps dropping. */
import assert from "node:assert/strict";
import { after, before, test } from "node:test";

import { WebSocket } from "ws";

import { AwakenApiError, AwakenClient, AwakenSocketError } from "../src/client.js";
import type { SocketLike } from "../src/client.js";
import { FakeAwaken, TOKEN } from "./fake-server.js";
import { ended, following, text } from "./frames.js";

let server: FakeAwaken;
before(async () => {
  server = await new FakeAwaken().start();
});
after(async () => {
  await server.stop();
});

function client(token = TOKEN): AwakenClient {
  return new AwakenClient({
    baseUrl: server.baseUrl,
    socketUrl: server.socketUrl,
    token,
    socket: (url) => new WebSocket(url) as unknown as SocketLike,
    maxReconnects: 3,
    reconnectDelay: () => 0,
  });
}

test("an HTTP refusal is an AwakenApiError with the API's code", async () => {
  await assert.rejects(client().getRun("nope"), (error: unknown) => {
    assert.ok(error instanceof AwakenApiError);
    assert.deepEqual([error.status, error.code], [404, "not_found"]);
    return true;
  });
  await assert.rejects(client("wrong").getThread("t"), { name: "AwakenApiError", status: 401 });
});

test("a socket refusal ends the follow with its code", async () => {
  const follower = client().follow("missing");
  const events = (async () => {
    for await (const _ of follower);
  })();
  const { connection } = await server.next();
  connection.send({
    type: "error",
    code: "not_found",
    message: "no such run of yours",
    run_id: "missing",
  });
  await assert.rejects(events, (error: unknown) => {
    assert.ok(error instanceof AwakenSocketError);
    assert.equal(error.code, "not_found");
    return true;
  });
});

test("an unavailable answer is retried on a new connection from the same position", async () => {
  const follower = client().follow("r-retry");
  const seen: string[] = [];
  const events = (async () => {
    for await (const event of follower) seen.push(event.kind);
  })();
  const first = await server.next();
  first.connection.send(following("r-retry"), text("r-retry", 0, 0, "abc"));
  first.connection.send({ type: "error", code: "unavailable", message: "m", run_id: "r-retry" });
  const again = await server.next();
  assert.deepEqual(again.message, { action: "follow", run_id: "r-retry", turn: 0, after: 3 });
  again.connection.send(text("r-retry", 0, 1, "bcd"), ended("r-retry", "completed"));
  await events;
  assert.deepEqual(seen, ["text", "text", "ended"]);
  assert.equal(follower.state.text, "abcd");
});

test("a socket that drops every connection without progress makes the follow give up", async () => {
  const follower = client().follow("r-drop");
  const events = (async () => {
    for await (const _ of follower);
  })();
  for (let attempt = 0; attempt < 3; attempt++) {
    const { connection } = await server.next();
    connection.send(following("r-drop"));
    connection.drop();
  }
  await assert.rejects(events, { name: "AwakenSocketError", code: "socket_failed" });
});
