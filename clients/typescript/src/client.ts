/**
 * The awaken-s3 HTTP API (the caller's JWT as `Authorization: Bearer`) and the follow of a run
 * over the WebSocket API (the JWT as the `token` query parameter: browsers cannot set headers
 * on a WebSocket handshake).
 */
import { FollowedRun, emptyState } from "./followed.js";
import type { FollowEvent, FollowedState } from "./followed.js";
import {
  HTTP_ROUTES,
  SOCKET_TOKEN_PARAMETER,
  TERMINAL_STATUSES,
} from "./protocol.generated.js";
import type {
  CreateRunRequest,
  CreateThreadRequest,
  RunStatus,
  RunView,
  ServerFrame,
  ThreadView,
} from "./protocol.generated.js";

/** The smallest WebSocket the client needs: the browser's, Node 22's, or the `ws` package's. */
export interface SocketLike {
  readonly readyState: number;
  send(data: string): void;
  close(code?: number, reason?: string): void;
  onopen: ((event: unknown) => void) | null;
  onmessage: ((event: { data: unknown }) => void) | null;
  onclose: ((event: unknown) => void) | null;
  onerror: ((event: unknown) => void) | null;
}
export type SocketFactory = (url: string) => SocketLike;

/** The JWT, or a function that returns a fresh one (called for every request and connect). */
export type TokenSource = string | (() => string | Promise<string>);

export interface AwakenClientOptions {
  /** the HTTP API's base URL, e.g. `https://<api>.execute-api.<region>.amazonaws.com` */
  baseUrl: string;
  /** the WebSocket API's URL (`SocketUrl`), e.g. `ws://127.0.0.1:8787/ws` under `awaken-s3 dev` */
  socketUrl?: string;
  token?: TokenSource;
  fetch?: typeof fetch;
  /** how to open a WebSocket; default: the global `WebSocket` */
  socket?: SocketFactory;
  /** connections opened in a row without a frame before a follow gives up */
  maxReconnects?: number;
  /** milliseconds to wait before reconnect attempt `n` (0 for the first) */
  reconnectDelay?: (attempt: number) => number;
}

/** An HTTP API error: its status and the API's fixed `error` code. */
export class AwakenApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    readonly details?: unknown,
  ) {
    super(message);
    this.name = "AwakenApiError";
  }
}

/** A WebSocket `error` frame the follow cannot get past, or a socket that keeps failing. */
export class AwakenSocketError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
    this.name = "AwakenSocketError";
  }
}

/** Socket error codes a follow answers by sending the follow again on a new connection. */
const RETRY_CODES: ReadonlySet<string> = new Set(["unavailable", "unauthorized"]);

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.includes(status);
}

function defaultSocket(url: string): SocketLike {
  const Socket = (globalThis as { WebSocket?: new (url: string) => SocketLike }).WebSocket;
  if (Socket === undefined) {
    throw new AwakenSocketError(
      "no_websocket",
      "no global WebSocket here: pass `socket` (e.g. url => new WebSocket(url) from 'ws')",
    );
  }
  return new Socket(url);
}

function path(template: string, ids: Record<string, string>): string {
  return template.replace(/\{(\w+)\}/g, (_, name: string) => encodeURIComponent(ids[name] ?? ""));
}

export interface FollowOptions {
  /** what was held before (a page refresh): the follow resumes from its position */
  from?: FollowedState;
  /** follow from the run's first turn (a client that holds nothing of a run it replays) */
  fromStart?: boolean;
  signal?: AbortSignal;
  /** called after every frame with the state, e.g. to store it */
  onState?: (state: FollowedState) => void | Promise<void>;
}

export class AwakenClient {
  readonly options: AwakenClientOptions;

  constructor(options: AwakenClientOptions) {
    this.options = options;
  }

  async token(): Promise<string | undefined> {
    const token = this.options.token;
    return typeof token === "function" ? await token() : token;
  }

  private async request<T>(
    route: keyof typeof HTTP_ROUTES,
    ids: Record<string, string>,
    body?: unknown,
  ): Promise<T> {
    const { method, path: template } = HTTP_ROUTES[route];
    const headers: Record<string, string> = { accept: "application/json" };
    const token = await this.token();
    if (token) headers.authorization = `Bearer ${token}`;
    if (body !== undefined) headers["content-type"] = "application/json";
    const url = this.options.baseUrl.replace(/\/+$/, "") + path(template, ids);
    const doFetch = this.options.fetch ?? fetch;
    const init: RequestInit = { method, headers };
    if (body !== undefined) init.body = JSON.stringify(body);
    const response = await doFetch(url, init);
    const text = await response.text();
    const parsed: unknown = text ? JSON.parse(text) : {};
    if (!response.ok) {
      const error = (parsed ?? {}) as { error?: string; message?: string; details?: unknown };
      throw new AwakenApiError(
        response.status,
        error.error ?? "http_error",
        error.message ?? `HTTP ${response.status}`,
        error.details,
      );
    }
    return parsed as T;
  }

  /** Create a thread (an existing id with the same metadata answers the thread as it is). */
  createThread(request: CreateThreadRequest = {}): Promise<ThreadView> {
    return this.request("CreateThread", {}, request);
  }

  getThread(threadId: string): Promise<ThreadView & { messages: ThreadMessage[] }> {
    return this.request("GetThread", { thread_id: threadId });
  }

  /** Start a run; pass `run_id` to make a retry safe (the same id answers the same run). */
  createRun(threadId: string, request: CreateRunRequest): Promise<RunView> {
    return this.request("CreateRun", { thread_id: threadId }, request);
  }

  getRun(runId: string): Promise<RunView> {
    return this.request("GetRun", { run_id: runId });
  }

  cancelRun(runId: string): Promise<RunView> {
    return this.request("CancelRun", { run_id: runId }, {});
  }

  /** Follow a run over the WebSocket API until it ends (see {@link RunFollower}). */
  follow(runId: string, options: FollowOptions = {}): RunFollower {
    return new RunFollower(this, runId, options);
  }
}

/** A message of a thread as `GET /threads/{id}` answers it. */
export interface ThreadMessage {
  role: "user" | "assistant";
  content: ContentBlock[];
}
export type ContentBlock =
  | { type: "text"; text: string }
  | { type: "tool_use"; id: string; name: string; input: Record<string, unknown> }
  | { type: "tool_result"; tool_use_id: string; content: string; is_error: boolean }
  | { type: string; [field: string]: unknown };

type Pending = { resolve: () => void };

/**
 * One run followed over the WebSocket API: an async iterable of {@link FollowEvent}s that ends
 * after the run's `ended` event. A dropped connection is opened again with the turn and offset
 * held, so nothing is repeated or lost; it gives up (throwing {@link AwakenSocketError}) after
 * `maxReconnects` connections in a row that brought no frame.
 */
export class RunFollower implements AsyncIterable<FollowEvent> {
  readonly run: FollowedRun;
  private socket: SocketLike | null = null;
  private queue: FollowEvent[] = [];
  private failure: Error | null = null;
  private waiting: Pending | null = null;
  private closed = false;
  private failedConnects = 0;

  constructor(
    private readonly client: AwakenClient,
    readonly runId: string,
    private readonly options: FollowOptions,
  ) {
    this.run = new FollowedRun(options.from ?? emptyState(runId));
    options.signal?.addEventListener("abort", () => this.stop());
  }

  get state(): FollowedState {
    return this.run.state;
  }

  /** Cancel the run through the open socket (else through the HTTP API). */
  async cancel(): Promise<void> {
    const socket = this.socket;
    if (socket !== null && socket.readyState === 1) {
      socket.send(JSON.stringify({ action: "cancel", run_id: this.runId }));
      return;
    }
    await this.client.cancelRun(this.runId);
  }

  /** Stop following (the run goes on). */
  stop(): void {
    this.closed = true;
    this.socket?.close(1000);
    this.wake();
  }

  private wake(): void {
    const waiting = this.waiting;
    this.waiting = null;
    waiting?.resolve();
  }

  private followMessage(): string {
    const message: Record<string, unknown> = { action: "follow", run_id: this.runId };
    const position = this.run.position();
    if (position !== null) Object.assign(message, position);
    else if (this.options.fromStart) Object.assign(message, { turn: 0, after: 0 });
    return JSON.stringify(message);
  }

  private async address(): Promise<string> {
    const url = this.client.options.socketUrl;
    if (!url) throw new AwakenSocketError("no_socket_url", "the client has no socketUrl");
    const token = await this.client.token();
    if (!token) return url;
    const join = url.includes("?") ? "&" : "?";
    return `${url}${join}${SOCKET_TOKEN_PARAMETER}=${encodeURIComponent(token)}`;
  }

  private async onFrame(raw: unknown): Promise<void> {
    const frame = JSON.parse(String(raw)) as ServerFrame;
    if (frame.type === "error") {
      if (RETRY_CODES.has(frame.code)) {
        this.socket?.close(1000);
        return;
      }
      this.failure = new AwakenSocketError(frame.code, frame.message);
      this.stop();
      return;
    }
    const events = this.run.apply(frame);
    // Only a frame that brought something counts as progress: a server that answers every
    // follow and then drops the connection still makes the follow give up.
    if (events.length > 0) this.failedConnects = 0;
    if (events.length > 0) await this.options.onState?.(this.run.state);
    this.queue.push(...events);
    if (this.run.state.status !== null) this.socket?.close(1000);
    this.wake();
  }

  private async connect(): Promise<void> {
    const socket = (this.client.options.socket ?? defaultSocket)(await this.address());
    this.socket = socket;
    // Frames are applied one at a time, in order, even when storing the state is async.
    let chain = Promise.resolve();
    socket.onopen = () => socket.send(this.followMessage());
    socket.onmessage = (event) => {
      chain = chain.then(() => this.onFrame(event.data)).catch((error: unknown) => {
        this.failure = error instanceof Error ? error : new Error(String(error));
        this.stop();
      });
    };
    socket.onerror = () => undefined;
    socket.onclose = () => {
      void chain.then(() => {
        if (this.socket === socket) this.socket = null;
        this.wake();
      });
    };
  }

  private async reconnect(): Promise<void> {
    const attempt = this.failedConnects++;
    const limit = this.client.options.maxReconnects ?? 8;
    if (attempt >= limit) {
      this.failure = new AwakenSocketError(
        "socket_failed",
        `the socket closed ${attempt} times in a row without a frame`,
      );
      return;
    }
    const delay = (this.client.options.reconnectDelay ?? backoff)(attempt);
    if (delay > 0) await new Promise((resolve) => setTimeout(resolve, delay));
    if (!this.closed) await this.connect();
  }

  async *[Symbol.asyncIterator](): AsyncIterator<FollowEvent> {
    try {
      while (true) {
        const event = this.queue.shift();
        if (event !== undefined) {
          yield event;
          continue;
        }
        if (this.failure !== null) throw this.failure;
        if (this.closed || this.run.state.status !== null) return;
        if (this.socket === null) {
          await this.reconnect();
          if (this.failure !== null) continue;
        }
        await new Promise<void>((resolve) => {
          this.waiting = { resolve };
          if (this.queue.length > 0 || this.socket === null || this.closed) this.wake();
        });
      }
    } finally {
      if (this.socket !== null) this.socket.close(1000);
    }
  }
}

/** 0 ms, then 250 ms doubling to 8 s. */
export function backoff(attempt: number): number {
  return attempt === 0 ? 0 : Math.min(8000, 250 * 2 ** (attempt - 1));
}
