// Written by tests/clients/ts_protocol.py from the server's Python definitions.
// Do not edit: tests/clients/test_ts_protocol.py fails when this file drifts.

export type RunStatus = "queued" | "running" | "suspended" | "completed" | "failed" | "cancelled";
export const TERMINAL_STATUSES: readonly RunStatus[] = ["completed", "failed", "cancelled"];
export type Plan = "R1" | "R2" | "R3" | "R4";
export type SocketErrorCode = "invalid_message" | "invalid_id" | "not_found" | "unauthorized" | "unknown_action" | "too_many_follows" | "unavailable";
/** The failure codes a failed run's `error.code` may hold. */
export type FailureCode = "provider_error" | "retryable" | "connection_dropped" | "provider_unreachable" | "stream_stalled" | "server_error" | "throttled" | "overloaded" | "permanent" | "invalid_request" | "prefill_rejected" | "authentication_failed" | "quota_exhausted" | "model_not_found" | "context_overflow" | "content_filtered" | "tool_calls_lost" | "unexpected_error" | "retry_budget_exhausted" | "step_limit" | "thread_moved_on" | "unknown_tool" | "unknown_agent" | "no_progress" | "budget_exhausted" | "tool_timed_out" | "tool_call_mismatch" | "refusal" | "abandoned";
/** A failed run's error as a caller sees it: a code and a fixed sentence. */
export interface PublicError {
  code: string;
  message: string;
}

export interface TextFrame {
  type: "text";
  run_id: string;
  turn: number;
  offset: number;
  text: string;
}
export interface ToolCallFrame {
  type: "tool_call";
  run_id: string;
  turn: number;
  index: number;
  id: string;
  name: string;
  offset: number;
  input_length: number;
  input_json: string;
}
export interface ResumedFrame {
  type: "resumed";
  run_id: string;
  turn: number;
  plan: Plan;
  retry_count: number;
}
export interface TurnCommittedFrame {
  type: "turn_committed";
  run_id: string;
  turn: number;
  text_length: number;
  tool_calls: number;
}
export interface RunEndedFrame {
  type: "run_ended";
  run_id: string;
  status: RunStatus;
  error: PublicError | null;
}
export interface ErrorFrame {
  type: "error";
  code: SocketErrorCode;
  message: string;
  run_id: string | null;
}
export interface SkippedFrame {
  type: "skipped";
  run_id: string;
  turn: number;
  of: "text" | "tool_call";
  offset?: number;
  index?: number;
}
export interface FollowingFrame {
  type: "following";
  run_id: string;
  turn: number;
  offset: number;
}
export interface CancelFrame {
  type: "cancel";
  run_id: string;
  status: RunStatus;
}
/** Every frame the WebSocket API sends. */
export type ServerFrame =
  | TextFrame
  | ToolCallFrame
  | ResumedFrame
  | TurnCommittedFrame
  | RunEndedFrame
  | ErrorFrame
  | SkippedFrame
  | FollowingFrame
  | CancelFrame;

/** Messages a client sends on the WebSocket API. */
export interface FollowMessage {
  action: "follow";
  run_id: string;
  turn?: number;
  after?: number;
}
export interface CancelMessage {
  action: "cancel";
  run_id: string;
}
export const SOCKET_TOKEN_PARAMETER = "token";

/** The HTTP API's routes. */
export const HTTP_ROUTES = {
  ListAgents: { method: "GET", path: "/agents" },
  CreateThread: { method: "POST", path: "/threads" },
  GetThread: { method: "GET", path: "/threads/{thread_id}" },
  CreateRun: { method: "POST", path: "/threads/{thread_id}/runs" },
  GetRun: { method: "GET", path: "/runs/{run_id}" },
  GetRunPartial: { method: "GET", path: "/runs/{run_id}/partial" },
  CancelRun: { method: "POST", path: "/runs/{run_id}/cancel" },
} as const;

export interface CreateThreadRequest {
  thread_id?: string | null;
  metadata?: Record<string, string>;
}
export interface CreateRunRequest {
  message: string;
  run_id?: string | null;
  agent?: string | null;
  system?: string | null;
  max_tokens?: number | null;
  model?: string | null;
  temperature?: number | null;
  tools?: string[] | null;
  max_turns?: number | null;
  token_budget?: number | null;
}
export interface Usage {
  input_tokens: number;
  output_tokens: number;
  cache_read_tokens: number;
  cache_write_tokens: number;
}
export interface ThreadView {
  thread_id: string;
  message_count: number;
  created_at: number;
  metadata: Record<string, string>;
  latest_run: string | null;
}
export interface RunView {
  run_id: string;
  thread_id: string;
  status: RunStatus;
  turn: number;
  message_count: number;
  model: string;
  usage: Usage;
  stop_reason: string | null;
  error: PublicError | null;
  created_at: number;
  updated_at: number;
  partial?: unknown;
  partial_unavailable?: boolean;
}
