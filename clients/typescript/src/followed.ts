/**
 * A followed run as the client assembles it from WebSocket frames, by offset.
 *
 * The same assembly as the server's Python reference (`FollowedText` in
 * awaken_s3/service/frames.py): keep the characters of a piece past the length held, ignore a
 * frame of a turn already committed or behind, key tool calls by (turn, index) because a
 * provider's call ids repeat across turns. Offsets count Unicode code points, as Python's
 * string indices do, so the held lengths here are code point counts, not UTF-16 lengths.
 */
import type {
  Plan,
  PublicError,
  RunStatus,
  ServerFrame,
  SkippedFrame,
} from "./protocol.generated.js";

/** Characters (code points) of a string, as the server counts offsets. */
export function codePointLength(text: string): number {
  let count = 0;
  for (let i = 0; i < text.length; i++) {
    const unit = text.charCodeAt(i);
    // A high surrogate followed by a low one is one code point.
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) i++;
    }
    count++;
  }
  return count;
}

/** `text` from code point `start` (to code point `end` when given). */
export function codePointSlice(text: string, start: number, end?: number): string {
  if (start <= 0 && end === undefined) return text;
  const points = Array.from(text);
  return points.slice(Math.max(0, start), end).join("");
}

/** A tool call as assembled from its `tool_call` frames. */
export interface FollowedCall {
  turn: number;
  index: number;
  /** the provider's id (may repeat across turns) */
  id: string;
  name: string;
  /** code points of the input's JSON text in all */
  length: number;
  /** the input's JSON text held so far */
  inputJson: string;
  /** code points of `inputJson` */
  held: number;
}

export function callComplete(call: FollowedCall): boolean {
  return call.held === call.length;
}

/** What a frame changed, for a renderer. */
export type FollowEvent =
  | { kind: "text"; turn: number; delta: string }
  | { kind: "tool_call"; call: FollowedCall }
  | { kind: "resumed"; turn: number; plan: Plan; retryCount: number }
  | { kind: "turn_committed"; turn: number; text: string; toolCalls: number }
  | { kind: "skipped"; frame: SkippedFrame }
  | { kind: "ended"; status: RunStatus; error: PublicError | null };

/** The plain data of a followed run: what a page keeps to resume after a refresh. */
export interface FollowedState {
  runId: string;
  /** the turn being assembled (null before the first frame) */
  turn: number | null;
  text: string;
  /** code points of `text` */
  length: number;
  /** text of each turn the run committed, as assembled */
  committed: Record<string, string>;
  /** tool calls by `${turn}:${index}` */
  toolCalls: Record<string, FollowedCall>;
  plans: Plan[];
  status: RunStatus | null;
  error: PublicError | null;
  /** characters received again (a resumed worker re-sends from the offset a follow named) */
  repeated: number;
  /** frames whose offset lay past what was held: never expected */
  gaps: number;
  skipped: SkippedFrame[];
}

export function emptyState(runId: string): FollowedState {
  return {
    runId,
    turn: null,
    text: "",
    length: 0,
    committed: {},
    toolCalls: {},
    plans: [],
    status: null,
    error: null,
    repeated: 0,
    gaps: 0,
    skipped: [],
  };
}

export function callKey(turn: number, index: number): string {
  return `${turn}:${index}`;
}

/** Tool calls of `turn` held, in order. */
export function callsOf(state: FollowedState, turn: number): FollowedCall[] {
  return Object.values(state.toolCalls)
    .filter((call) => call.turn === turn)
    .sort((a, b) => a.index - b.index);
}

/** Assembles frames into a {@link FollowedState} (which it owns and mutates). */
export class FollowedRun {
  readonly state: FollowedState;

  constructor(state: FollowedState) {
    this.state = state;
  }

  /** `{turn, after}` to name in a follow after a reconnect (none before the first frame). */
  position(): { turn: number; after: number } | null {
    const { turn, length } = this.state;
    return turn === null ? null : { turn, after: length };
  }

  private enter(turn: number): boolean {
    const state = this.state;
    if (state.turn !== null && turn < state.turn) return false;
    if (state.turn !== turn) {
      state.turn = turn;
      state.text = "";
      state.length = 0;
    }
    return true;
  }

  private text(turn: number, offset: number, text: string): FollowEvent[] {
    const state = this.state;
    const pieceLength = codePointLength(text);
    if (String(turn) in state.committed || !this.enter(turn)) {
      state.repeated += pieceLength;
      return [];
    }
    if (offset > state.length) {
      state.gaps += 1;
      return [];
    }
    const skip = state.length - offset;
    const fresh = skip >= pieceLength ? "" : codePointSlice(text, skip);
    state.repeated += Math.min(skip, pieceLength);
    if (!fresh) return [];
    state.text += fresh;
    state.length += pieceLength - skip;
    return [{ kind: "text", turn, delta: fresh }];
  }

  private toolCall(frame: ServerFrame & { type: "tool_call" }): FollowEvent[] {
    const state = this.state;
    const pieceLength = codePointLength(frame.input_json);
    if (String(frame.turn) in state.committed || !this.enter(frame.turn)) {
      state.repeated += pieceLength;
      return [];
    }
    const key = callKey(frame.turn, frame.index);
    let call = state.toolCalls[key];
    if (call === undefined) {
      call = {
        turn: frame.turn,
        index: frame.index,
        id: frame.id,
        name: frame.name,
        length: frame.input_length,
        inputJson: "",
        held: 0,
      };
      state.toolCalls[key] = call;
    }
    if (frame.offset > call.held) {
      state.gaps += 1;
      return [];
    }
    const wasComplete = callComplete(call);
    const skip = call.held - frame.offset;
    const take = Math.max(0, Math.min(pieceLength - skip, call.length - call.held));
    state.repeated += pieceLength - take;
    if (take > 0) {
      call.inputJson += codePointSlice(frame.input_json, skip, skip + take);
      call.held += take;
    }
    return !wasComplete && callComplete(call) ? [{ kind: "tool_call", call }] : [];
  }

  /** Fold one frame in; what it changed. */
  apply(frame: ServerFrame): FollowEvent[] {
    const state = this.state;
    if (state.status !== null) return [];
    switch (frame.type) {
      case "text":
        return this.text(frame.turn, frame.offset, frame.text);
      case "tool_call":
        return this.toolCall(frame);
      case "skipped":
        state.skipped.push(frame);
        return [{ kind: "skipped", frame }];
      case "resumed":
        state.plans.push(frame.plan);
        return [
          { kind: "resumed", turn: frame.turn, plan: frame.plan, retryCount: frame.retry_count },
        ];
      case "turn_committed": {
        if (!this.enter(frame.turn)) return [];
        const text = state.text;
        state.committed[String(frame.turn)] = text;
        state.turn = frame.turn + 1;
        state.text = "";
        state.length = 0;
        return [
          { kind: "turn_committed", turn: frame.turn, text, toolCalls: frame.tool_calls },
        ];
      }
      case "run_ended":
        state.status = frame.status;
        state.error = frame.error;
        return [{ kind: "ended", status: frame.status, error: frame.error }];
      default:
        return [];
    }
  }
}
