/**
 * A local stand-in for awaken-s3's HTTP API and WebSocket API, on 127.0.0.1 (a port the OS
 * picks), speaking the protocol of docs/HANDLERS.md. The HTTP side keeps threads and runs in
 * memory; the socket side hands each `follow` to the test, which sends the frames a server
 * would (and drops connections, as a dying worker's network would).
 */
import { once } from "node:events";
import { createServer } from "node:http";
import type { IncomingMessage, Server, ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

import { WebSocket, WebSocketServer } from "ws";

import type { RunStatus, ServerFrame } from "../src/protocol.generated.js";

export const TOKEN = "test-token";

export interface FakeRun {
  run_id: string;
  thread_id: string;
  status: RunStatus;
  turn: number;
  message_count: number;
}

export interface FakeThread {
  thread_id: string;
  messages: { role: "user" | "assistant"; content: Record<string, unknown>[] }[];
  latest_run: string | null;
}

/** A socket message the server received, with the connection it came on. */
export interface Received {
  connection: Connection;
  message: Record<string, unknown>;
}

export class Connection {
  constructor(readonly socket: WebSocket) {}

  send(...frames: ServerFrame[]): void {
    for (const frame of frames) this.socket.send(JSON.stringify(frame));
  }

  /** The connection dies without a close handshake. */
  drop(): void {
    this.socket.terminate();
  }
}

export class FakeAwaken {
  readonly threads = new Map<string, FakeThread>();
  readonly runs = new Map<string, FakeRun>();
  /** every HTTP request: method, path, body and the Authorization header */
  readonly requests: { method: string; path: string; body: unknown; auth: string | undefined }[] =
    [];
  /** every socket message, in order */
  readonly received: Received[] = [];
  private readonly waiters: ((received: Received) => void)[] = [];
  private readonly backlog: Received[] = [];
  private http!: Server;
  private sockets!: WebSocketServer;
  baseUrl = "";
  socketUrl = "";

  async start(): Promise<this> {
    this.http = createServer((request, response) => void this.serve(request, response));
    this.sockets = new WebSocketServer({ server: this.http, path: "/ws" });
    this.sockets.on("connection", (socket, request) => this.connected(socket, request));
    this.http.listen(0, "127.0.0.1");
    await once(this.http, "listening");
    const { port } = this.http.address() as AddressInfo;
    this.baseUrl = `http://127.0.0.1:${port}`;
    this.socketUrl = `ws://127.0.0.1:${port}/ws`;
    return this;
  }

  async stop(): Promise<void> {
    for (const client of this.sockets.clients) client.terminate();
    await new Promise<void>((resolve) => this.sockets.close(() => resolve()));
    this.http.closeAllConnections();
    await new Promise<void>((resolve) => this.http.close(() => resolve()));
  }

  /** The next socket message (one already received and not yet taken comes first). */
  next(): Promise<Received> {
    const ready = this.backlog.shift();
    if (ready !== undefined) return Promise.resolve(ready);
    return new Promise((resolve) => this.waiters.push(resolve));
  }

  private connected(socket: WebSocket, request: IncomingMessage): void {
    const url = new URL(request.url ?? "/", this.baseUrl);
    if (url.searchParams.get("token") !== TOKEN) {
      socket.close(1008);
      return;
    }
    const connection = new Connection(socket);
    socket.on("message", (data) => {
      const received = { connection, message: JSON.parse(String(data)) as Record<string, unknown> };
      this.received.push(received);
      const waiter = this.waiters.shift();
      if (waiter !== undefined) waiter(received);
      else this.backlog.push(received);
    });
  }

  private json(response: ServerResponse, status: number, body: unknown): void {
    response.writeHead(status, { "content-type": "application/json" });
    response.end(JSON.stringify(body));
  }

  private runView(run: FakeRun): Record<string, unknown> {
    return {
      ...run,
      model: "scripted",
      usage: { input_tokens: 0, output_tokens: 0, cache_read_tokens: 0, cache_write_tokens: 0 },
      stop_reason: null,
      error: null,
      created_at: 0,
      updated_at: 0,
      partial: null,
    };
  }

  private async serve(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const raw = Buffer.concat(chunks).toString("utf8");
    const body: unknown = raw ? JSON.parse(raw) : undefined;
    const method = request.method ?? "GET";
    const path = request.url ?? "/";
    const auth = request.headers.authorization;
    this.requests.push({ method, path, body, auth });
    if (auth !== `Bearer ${TOKEN}`) {
      return this.json(response, 401, { error: "unauthorized", message: "no token" });
    }
    const answer = this.route(method, path, (body ?? {}) as Record<string, unknown>);
    this.json(response, answer[0], answer[1]);
  }

  private route(method: string, path: string, body: Record<string, unknown>): [number, unknown] {
    const notFound: [number, unknown] = [404, { error: "not_found", message: "no such thread" }];
    let match: RegExpMatchArray | null;
    if (method === "POST" && path === "/threads") {
      const id = String(body.thread_id);
      const existing = this.threads.get(id);
      if (existing !== undefined) return [200, this.threadView(existing)];
      const thread: FakeThread = { thread_id: id, messages: [], latest_run: null };
      this.threads.set(id, thread);
      return [201, this.threadView(thread)];
    }
    if (method === "GET" && (match = path.match(/^\/threads\/([^/]+)$/))) {
      const thread = this.threads.get(decodeURIComponent(match[1] ?? ""));
      if (thread === undefined) return notFound;
      return [200, { ...this.threadView(thread), messages: thread.messages }];
    }
    if (method === "POST" && (match = path.match(/^\/threads\/([^/]+)\/runs$/))) {
      const thread = this.threads.get(decodeURIComponent(match[1] ?? ""));
      if (thread === undefined) return notFound;
      thread.messages.push({ role: "user", content: [{ type: "text", text: body.message }] });
      const run: FakeRun = {
        run_id: String(body.run_id),
        thread_id: thread.thread_id,
        status: "queued",
        turn: 0,
        message_count: thread.messages.length,
      };
      this.runs.set(run.run_id, run);
      thread.latest_run = run.run_id;
      return [202, this.runView(run)];
    }
    if ((match = path.match(/^\/runs\/([^/]+)(\/cancel)?$/))) {
      const run = this.runs.get(decodeURIComponent(match[1] ?? ""));
      if (run === undefined) return [404, { error: "not_found", message: "no such run" }];
      if (method === "POST" && match[2]) run.status = "cancelled";
      return [200, this.runView(run)];
    }
    return [404, { error: "not_found", message: "no such route" }];
  }

  private threadView(thread: FakeThread): Record<string, unknown> {
    return {
      thread_id: thread.thread_id,
      message_count: thread.messages.length,
      created_at: 0,
      metadata: {},
      latest_run: thread.latest_run,
    };
  }
}
