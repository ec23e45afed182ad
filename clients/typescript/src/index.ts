export * from "./protocol.generated.js";
export {
  codePointLength,
  codePointSlice,
  callComplete,
  callKey,
  callsOf,
  emptyState,
  FollowedRun,
} from "./followed.js";
export type { FollowEvent, FollowedCall, FollowedState } from "./followed.js";
export {
  AwakenApiError,
  AwakenClient,
  AwakenSocketError,
  RunFollower,
  backoff,
  isTerminal,
} from "./client.js";
export type {
  AwakenClientOptions,
  ContentBlock,
  FollowOptions,
  SocketFactory,
  SocketLike,
  ThreadMessage,
  TokenSource,
} from "./client.js";
export { MemoryChatStore, WebStorageChatStore } from "./store.js";
export type { ChatStore, Resume, SavedChat, ToolOutput, WebStorageLike } from "./store.js";
export { AwakenChatTransport, toolCallId, toolOutputs } from "./transport.js";
export type {
  AwakenChatTransportOptions,
  AwakenDataTypes,
  AwakenMessageMetadata,
  AwakenUIMessage,
} from "./transport.js";
