/** Frames as the server builds them (awaken_s3/service/frames.py), for the fake server. */
import type {
  Plan,
  PublicError,
  RunStatus,
  ServerFrame,
} from "../src/protocol.generated.js";

export const following = (run_id: string, turn = 0, offset = 0): ServerFrame => ({
  type: "following",
  run_id,
  turn,
  offset,
});

export const text = (run_id: string, turn: number, offset: number, text: string): ServerFrame => ({
  type: "text",
  run_id,
  turn,
  offset,
  text,
});

/** Tool call `index` of `turn` cut into pieces of at most `size` code points. */
export function toolCall(
  run_id: string,
  turn: number,
  index: number,
  id: string,
  name: string,
  input: Record<string, unknown>,
  size = 1_000_000,
): ServerFrame[] {
  const keys = Object.keys(input).sort();
  const json = JSON.stringify(Object.fromEntries(keys.map((k) => [k, input[k]])));
  const points = Array.from(json);
  const out: ServerFrame[] = [];
  for (let offset = 0; offset < points.length; offset += size) {
    out.push({
      type: "tool_call",
      run_id,
      turn,
      index,
      id,
      name,
      offset,
      input_length: points.length,
      input_json: points.slice(offset, offset + size).join(""),
    });
  }
  return out;
}

export const resumed = (run_id: string, turn: number, plan: Plan, retry_count: number) =>
  ({ type: "resumed", run_id, turn, plan, retry_count }) as ServerFrame;

export const committed = (run_id: string, turn: number, text: string, tool_calls = 0) =>
  ({
    type: "turn_committed",
    run_id,
    turn,
    text_length: Array.from(text).length,
    tool_calls,
  }) as ServerFrame;

export const ended = (run_id: string, status: RunStatus, error: PublicError | null = null) =>
  ({ type: "run_ended", run_id, status, error }) as ServerFrame;
