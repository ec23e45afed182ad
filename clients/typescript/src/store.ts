/**
 * Where a chat keeps what it followed, so that a page refresh resumes from it: the run, the
 * assistant message's id and the assembled state (offsets included).
 */
import type { FollowedState } from "./followed.js";
import type { Plan } from "./protocol.generated.js";

/** A tool call's result as the thread holds it. */
export interface ToolOutput {
  output: string;
  isError: boolean;
}

/** A resume of the run's turn by a new worker, as shown. */
export interface Resume {
  turn: number;
  plan: Plan;
  retryCount: number;
}

/** What a chat keeps of its latest run. */
export interface SavedChat {
  threadId: string;
  runId: string;
  /** the assistant message the run's stream fills */
  messageId: string;
  state: FollowedState;
  /** tool results read from the thread, by `${turn}:${index}` */
  outputs: Record<string, ToolOutput>;
  resumes: Resume[];
}

/** A pluggable store: memory, `localStorage`, IndexedDB, a server... (sync or async). */
export interface ChatStore {
  get(chatId: string): SavedChat | undefined | Promise<SavedChat | undefined>;
  set(chatId: string, saved: SavedChat): void | Promise<void>;
  delete(chatId: string): void | Promise<void>;
}

export class MemoryChatStore implements ChatStore {
  private readonly chats = new Map<string, string>();

  get(chatId: string): SavedChat | undefined {
    const raw = this.chats.get(chatId);
    // Stored as JSON, as a web store would: nobody shares the live object.
    return raw === undefined ? undefined : (JSON.parse(raw) as SavedChat);
  }

  set(chatId: string, saved: SavedChat): void {
    this.chats.set(chatId, JSON.stringify(saved));
  }

  delete(chatId: string): void {
    this.chats.delete(chatId);
  }
}

/** The part of the Web Storage API (`localStorage`, `sessionStorage`) the store uses. */
export interface WebStorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export class WebStorageChatStore implements ChatStore {
  constructor(
    private readonly storage: WebStorageLike,
    private readonly prefix = "awaken-s3:chat:",
  ) {}

  get(chatId: string): SavedChat | undefined {
    const raw = this.storage.getItem(this.prefix + chatId);
    if (raw === null) return undefined;
    try {
      return JSON.parse(raw) as SavedChat;
    } catch {
      // A damaged entry is as good as none: the chat replays its run from the server.
      return undefined;
    }
  }

  set(chatId: string, saved: SavedChat): void {
    this.storage.setItem(this.prefix + chatId, JSON.stringify(saved));
  }

  delete(chatId: string): void {
    this.storage.removeItem(this.prefix + chatId);
  }
}
