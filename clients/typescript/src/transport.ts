/**
 * An AI SDK `ChatTransport` over awaken-s3: `useChat({ transport, resume: true })`.
 *
 * A chat is a thread (the chat id is the thread id); each user message starts a run on it and
 * the run is followed over the WebSocket API, its frames turned into the SDK's UI message
 * chunks. What was followed is kept in a {@link ChatStore} after every frame, so a page that
 * comes back (`reconnectToStream`) replays what it held and follows on from its offsets. Only
 * types are imported from `ai`: nothing here runs the SDK's code.
 */
import type { ChatRequestOptions, ChatTransport, UIMessage, UIMessageChunk } from "ai";

import { AwakenApiError, isTerminal } from "./client.js";
import type { AwakenClient, RunFollower, ThreadMessage } from "./client.js";
import { callKey, callsOf, emptyState } from "./followed.js";
import type { FollowEvent, FollowedCall } from "./followed.js";
import type {
  CreateRunRequest,
  Plan,
  PublicError,
  RunStatus,
  RunView,
  SkippedFrame,
} from "./protocol.generated.js";
import { MemoryChatStore } from "./store.js";
import type { ChatStore, SavedChat, ToolOutput } from "./store.js";

/** The assistant message's metadata: which run fills it and how it went. */
export interface AwakenMessageMetadata {
  runId: string;
  threadId: string;
  status?: RunStatus;
  error?: PublicError | null;
  /** the recovery plans of each resume, in order */
  plans?: Plan[];
}

/** The data parts the transport adds to the assistant message. */
export type AwakenDataTypes = {
  /** a new worker took a turn over after the previous one died */
  "awaken-resumed": { turn: number; plan: Plan; retryCount: number };
  /** a turn was committed to the thread (the checkpoint is gone) */
  "awaken-turn": { turn: number; textLength: number; toolCalls: number };
  /** a piece the WebSocket API could not carry: read the turn from the thread */
  "awaken-skipped": { turn: number; of: SkippedFrame["of"] };
};

export type AwakenUIMessage = UIMessage<AwakenMessageMetadata, AwakenDataTypes>;
type Chunk = UIMessageChunk<AwakenMessageMetadata, AwakenDataTypes>;

export interface AwakenChatTransportOptions {
  client: AwakenClient;
  /** where each chat keeps what it followed (default: memory, which a refresh loses) */
  store?: ChatStore;
  /** the run's settings besides its message (agent, model, ...) */
  runRequest?: (options: { chatId: string }) => Omit<CreateRunRequest, "message" | "run_id">;
  /** cancel the run when the chat stops the stream (default: the run goes on) */
  cancelOnAbort?: boolean;
  newId?: () => string;
}

function textOf(message: UIMessage | undefined): string {
  if (message === undefined || message.role !== "user") {
    throw new Error("the last message must be the user's message to send");
  }
  return message.parts
    .map((part) => (part.type === "text" ? part.text : ""))
    .join("");
}

/** The UI's id of a tool call: unique in the message, as the provider's id is not. */
export function toolCallId(call: Pick<FollowedCall, "turn" | "index" | "id">): string {
  return `${call.turn}:${call.index}:${call.id}`;
}

/**
 * The tool results of `run`'s turns, by `${turn}:${index}`: the run's committed model turns
 * are its last `run.turn` assistant messages of the thread as it last advanced it, and each
 * call's result is in the user message that follows its turn.
 */
export function toolOutputs(run: RunView, messages: ThreadMessage[]): Map<string, ToolOutput> {
  const mine = messages.slice(0, run.message_count);
  const assistant = mine.flatMap((m, i) => (m.role === "assistant" ? [i] : []));
  const count = Math.min(run.turn, assistant.length);
  const out = new Map<string, ToolOutput>();
  assistant.slice(assistant.length - count).forEach((at, k) => {
    const turn = run.turn - count + k;
    const results = new Map<string, ToolOutput>();
    for (const block of mine[at + 1]?.content ?? []) {
      if (block.type === "tool_result") {
        const result = block as { tool_use_id: string; content: string; is_error: boolean };
        results.set(result.tool_use_id, { output: result.content, isError: result.is_error });
      }
    }
    const uses = (mine[at]?.content ?? []).filter((block) => block.type === "tool_use");
    uses.forEach((block, index) => {
      const found = results.get(String((block as { id?: unknown }).id));
      if (found !== undefined) out.set(callKey(turn, index), found);
    });
  });
  return out;
}

/** Turns followed events into UI message chunks for one assistant message. */
class Renderer {
  private textOpen: number | null = null;
  private stepOpen = false;

  constructor(
    private readonly saved: SavedChat,
    private readonly emit: (chunk: Chunk) => void,
  ) {}

  private metadata(): AwakenMessageMetadata {
    const { runId, threadId, state, resumes } = this.saved;
    const metadata: AwakenMessageMetadata = { runId, threadId, plans: resumes.map((r) => r.plan) };
    if (state.status !== null) Object.assign(metadata, { status: state.status, error: state.error });
    return metadata;
  }

  start(): void {
    this.emit({ type: "start", messageId: this.saved.messageId, messageMetadata: this.metadata() });
  }

  private step(): void {
    if (!this.stepOpen) this.emit({ type: "start-step" });
    this.stepOpen = true;
  }

  private closeText(): void {
    if (this.textOpen !== null) this.emit({ type: "text-end", id: this.textId(this.textOpen) });
    this.textOpen = null;
  }

  private textId(turn: number): string {
    return `${this.saved.runId}:${turn}:text`;
  }

  text(turn: number, delta: string): void {
    this.step();
    if (this.textOpen !== turn) {
      this.closeText();
      this.textOpen = turn;
      this.emit({ type: "text-start", id: this.textId(turn) });
    }
    this.emit({ type: "text-delta", id: this.textId(turn), delta });
  }

  toolCall(call: FollowedCall): void {
    this.step();
    this.closeText();
    this.emit({
      type: "tool-input-available",
      toolCallId: toolCallId(call),
      toolName: call.name,
      input: JSON.parse(call.inputJson) as unknown,
      dynamic: true,
    });
  }

  output(call: FollowedCall, output: ToolOutput): void {
    if (output.isError) {
      this.emit({
        type: "tool-output-error",
        toolCallId: toolCallId(call),
        errorText: output.output,
        dynamic: true,
      });
    } else {
      this.emit({
        type: "tool-output-available",
        toolCallId: toolCallId(call),
        output: output.output,
        dynamic: true,
      });
    }
  }

  resumed(turn: number, plan: Plan, retryCount: number): void {
    this.emit({
      type: "data-awaken-resumed",
      id: `${this.saved.runId}:resumed:${turn}:${retryCount}`,
      data: { turn, plan, retryCount },
    });
    this.emit({ type: "message-metadata", messageMetadata: this.metadata() });
  }

  committed(turn: number, textLength: number, toolCalls: number): void {
    this.closeText();
    this.emit({
      type: "data-awaken-turn",
      id: `${this.saved.runId}:turn:${turn}`,
      data: { turn, textLength, toolCalls },
    });
    if (this.stepOpen) this.emit({ type: "finish-step" });
    this.stepOpen = false;
  }

  skipped(frame: SkippedFrame): void {
    this.emit({ type: "data-awaken-skipped", data: { turn: frame.turn, of: frame.of } });
  }

  ended(status: RunStatus, error: PublicError | null): void {
    this.closeText();
    if (this.stepOpen) this.emit({ type: "finish-step" });
    this.stepOpen = false;
    const messageMetadata = this.metadata();
    if (status === "failed") {
      const code = error?.code ?? "run_failed";
      this.emit({ type: "error", errorText: `${code}: ${error?.message ?? "the run failed"}` });
    }
    const finishReason = status === "completed" ? "stop" : status === "failed" ? "error" : "other";
    this.emit({ type: "finish", finishReason, messageMetadata });
  }
}

/**
 * `useChat({ transport: new AwakenChatTransport({ client, store }), resume: true })`.
 *
 * Every reconnect is a complete replay of the assistant message (`resumeStreamIsReplay`): the
 * stream starts with what the store held, rendered again, then follows on from its offsets.
 */
export class AwakenChatTransport<UI extends UIMessage = AwakenUIMessage>
  implements ChatTransport<UI>
{
  readonly resumeStreamIsReplay = true;
  readonly client: AwakenClient;
  readonly store: ChatStore;
  private readonly options: AwakenChatTransportOptions;
  private readonly followers = new Map<string, RunFollower>();

  constructor(options: AwakenChatTransportOptions) {
    this.options = options;
    this.client = options.client;
    this.store = options.store ?? new MemoryChatStore();
  }

  private newId(): string {
    return this.options.newId?.() ?? crypto.randomUUID();
  }

  async sendMessages(
    options: {
      trigger: "submit-message" | "regenerate-message";
      chatId: string;
      messageId: string | undefined;
      messages: UI[];
      abortSignal: AbortSignal | undefined;
    } & ChatRequestOptions,
  ): Promise<ReadableStream<UIMessageChunk>> {
    if (options.trigger === "regenerate-message") {
      throw new Error("an awaken-s3 thread only grows: send a new message instead");
    }
    const { chatId } = options;
    const message = textOf(options.messages[options.messages.length - 1]);
    try {
      await this.client.createThread({ thread_id: chatId });
    } catch (error) {
      // The thread exists with metadata of its own: it is still this chat's thread.
      if (!(error instanceof AwakenApiError && error.code === "thread_exists")) throw error;
    }
    const runId = this.newId();
    const saved: SavedChat = {
      threadId: chatId,
      runId,
      messageId: this.newId(),
      state: emptyState(runId),
      outputs: {},
      resumes: [],
    };
    // Kept before the run exists: a page closed meanwhile finds the run by its id.
    await this.store.set(chatId, saved);
    const settings = this.options.runRequest?.({ chatId }) ?? {};
    try {
      await this.client.createRun(chatId, { ...settings, message, run_id: runId });
    } catch (error) {
      await this.store.delete(chatId);
      throw error;
    }
    return this.stream(chatId, saved, false, options.abortSignal);
  }

  async reconnectToStream(
    options: { chatId: string; abortSignal?: AbortSignal } & ChatRequestOptions,
  ): Promise<ReadableStream<UIMessageChunk> | null> {
    const { chatId } = options;
    const held = await this.store.get(chatId);
    if (held !== undefined) {
      if (held.state.status !== null) return null;
      return this.stream(chatId, held, false, options.abortSignal);
    }
    const run = await this.activeRun(chatId);
    if (run === null) return null;
    const saved: SavedChat = {
      threadId: chatId,
      runId: run,
      messageId: this.newId(),
      state: emptyState(run),
      outputs: {},
      resumes: [],
    };
    await this.store.set(chatId, saved);
    return this.stream(chatId, saved, true, options.abortSignal);
  }

  /** Cancel the chat's run (through its socket while it is followed). */
  async cancel(chatId: string): Promise<void> {
    const follower = this.followers.get(chatId);
    if (follower !== undefined) return follower.cancel();
    const saved = await this.store.get(chatId);
    const runId = saved?.runId ?? (await this.activeRun(chatId));
    if (runId) await this.client.cancelRun(runId);
  }

  /** The thread's latest run while it has not ended, else null (no thread: null). */
  private async activeRun(chatId: string): Promise<string | null> {
    let latest: string | null;
    try {
      latest = (await this.client.getThread(chatId)).latest_run;
    } catch (error) {
      if (error instanceof AwakenApiError && error.status === 404) return null;
      throw error;
    }
    if (latest === null) return null;
    const run = await this.client.getRun(latest);
    return isTerminal(run.status) ? null : latest;
  }

  private replay(saved: SavedChat, render: Renderer): void {
    const { state } = saved;
    const current = state.turn ?? 0;
    for (let turn = 0; turn <= current; turn++) {
      for (const resume of saved.resumes.filter((r) => r.turn === turn)) {
        render.resumed(resume.turn, resume.plan, resume.retryCount);
      }
      const committed = state.committed[String(turn)];
      const text = committed ?? (turn === current ? state.text : "");
      if (text) render.text(turn, text);
      for (const call of callsOf(state, turn).filter((c) => c.held === c.length)) {
        render.toolCall(call);
        const output = saved.outputs[callKey(turn, call.index)];
        if (output !== undefined) render.output(call, output);
      }
      if (committed !== undefined) {
        const calls = callsOf(state, turn).length;
        render.committed(turn, [...committed].length, calls);
      }
    }
  }

  /** Tool results the thread has now that were not shown yet (best effort: a failed read
   * leaves them for the next commit or the run's end). */
  private async outputs(saved: SavedChat, render: Renderer): Promise<void> {
    let found: Map<string, ToolOutput>;
    try {
      const [run, thread] = await Promise.all([
        this.client.getRun(saved.runId),
        this.client.getThread(saved.threadId),
      ]);
      found = toolOutputs(run, thread.messages);
    } catch {
      return;
    }
    for (const [key, output] of found) {
      const call = saved.state.toolCalls[key];
      if (call === undefined || key in saved.outputs) continue;
      saved.outputs[key] = output;
      render.output(call, output);
    }
  }

  private async render(saved: SavedChat, event: FollowEvent, render: Renderer): Promise<void> {
    switch (event.kind) {
      case "text":
        return render.text(event.turn, event.delta);
      case "tool_call":
        return render.toolCall(event.call);
      case "resumed":
        saved.resumes.push({ turn: event.turn, plan: event.plan, retryCount: event.retryCount });
        return render.resumed(event.turn, event.plan, event.retryCount);
      case "skipped":
        return render.skipped(event.frame);
      case "turn_committed":
        render.committed(event.turn, [...event.text].length, event.toolCalls);
        if (event.toolCalls > 0) await this.outputs(saved, render);
        return;
      case "ended":
        await this.outputs(saved, render);
        return render.ended(event.status, event.error);
    }
  }

  private stream(
    chatId: string,
    saved: SavedChat,
    fromStart: boolean,
    signal: AbortSignal | undefined,
  ): ReadableStream<UIMessageChunk> {
    const follower = this.client.follow(saved.runId, {
      from: saved.state,
      fromStart,
      onState: () => this.store.set(chatId, saved),
    });
    this.followers.set(chatId, follower);
    const forget = () => {
      if (this.followers.get(chatId) === follower) this.followers.delete(chatId);
    };
    signal?.addEventListener("abort", () => {
      if (this.options.cancelOnAbort) void follower.cancel().catch(() => undefined);
      follower.stop();
    });
    // A reader that cancelled the stream gets nothing more (the follow stops with it).
    let open = true;
    return new ReadableStream<UIMessageChunk>({
      start: (controller) => {
        const render = new Renderer(saved, (chunk) => {
          if (open) controller.enqueue(chunk as UIMessageChunk);
        });
        const pump = async () => {
          render.start();
          this.replay(saved, render);
          for await (const event of follower) {
            await this.render(saved, event, render);
            await this.store.set(chatId, saved);
          }
        };
        pump().then(
          () => {
            forget();
            if (open) controller.close();
          },
          (error: unknown) => {
            forget();
            if (open) controller.error(error);
          },
        );
      },
      cancel: () => {
        open = false;
        forget();
        follower.stop();
      },
    });
  }
}
