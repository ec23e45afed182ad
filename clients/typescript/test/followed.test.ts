/**
 * The TypeScript assembly against the Python reference: each sequence of
 * fixtures/followed.json was made by the server's `frames_from` and folded by Python's
 * `FollowedText` (tests/clients/followed_fixture.py); `FollowedRun` must hold the same.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";

import {
  FollowedRun,
  codePointLength,
  codePointSlice,
  emptyState,
} from "../src/followed.js";
import type { ServerFrame } from "../src/protocol.generated.js";
import { text } from "./frames.js";

interface Case {
  name: string;
  frames: ServerFrame[];
  expected: {
    turn: number | null;
    text: string;
    committed: Record<string, string>;
    tool_calls: Record<string, { id: string; name: string; input_json: string }>;
    plans: string[];
    status: string | null;
    error: unknown;
    repeated: number;
    gaps: number;
  };
}

const cases = JSON.parse(
  readFileSync(new URL("../../test/fixtures/followed.json", import.meta.url), "utf8"),
) as Case[];

for (const { name, frames, expected } of cases) {
  test(`as the Python client: ${name}`, () => {
    const run = new FollowedRun(emptyState("r"));
    for (const frame of frames) run.apply(frame);
    const state = run.state;
    assert.equal(state.turn, expected.turn);
    assert.equal(state.text, expected.text);
    assert.equal(state.length, codePointLength(expected.text));
    assert.deepEqual(state.committed, expected.committed);
    const calls = Object.fromEntries(
      Object.entries(state.toolCalls).map(([key, call]) => [
        key,
        { id: call.id, name: call.name, input_json: call.inputJson },
      ]),
    );
    assert.deepEqual(calls, expected.tool_calls);
    for (const call of Object.values(state.toolCalls)) {
      assert.equal(call.held, call.length, "every call is complete");
      JSON.parse(call.inputJson);
    }
    assert.deepEqual(state.plans, expected.plans);
    assert.equal(state.status, expected.status);
    assert.deepEqual(state.error, expected.error);
    assert.equal(state.repeated, expected.repeated);
    assert.equal(state.gaps, expected.gaps);
  });
}

test("offsets count code points, as Python's string indices do", () => {
  assert.equal(codePointLength("a🌍b"), 3);
  assert.equal("a🌍b".length, 4);
  assert.equal(codePointSlice("a🌍b🚀", 1, 3), "🌍b");
  const run = new FollowedRun(emptyState("r"));
  run.apply(text("r", 0, 0, "🌍🌍"));
  // Re-sent from offset 1: the second globe and what follows, once.
  const events = run.apply(text("r", 0, 1, "🌍🚀!"));
  assert.deepEqual(events, [{ kind: "text", turn: 0, delta: "🚀!" }]);
  assert.equal(run.state.text, "🌍🌍🚀!");
  assert.deepEqual(run.position(), { turn: 0, after: 4 });
});

test("a frame past the text held is a gap, never glued on", () => {
  const run = new FollowedRun(emptyState("r"));
  run.apply(text("r", 0, 0, "abc"));
  assert.deepEqual(run.apply(text("r", 0, 5, "fgh")), []);
  assert.equal(run.state.text, "abc");
  assert.equal(run.state.gaps, 1);
});
