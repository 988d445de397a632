/**
 * An intent's recording as the gateway answers a replay from it: each request of a replayed
 * attempt is matched to the recorded call at the same place (stage, attempt, order) and with the
 * same normalised request (exchange.ts). A request with no such call is a divergence, named by
 * the first thing that differs, and the replay cannot go on past it.
 */
import type { RecordedAnswer, RecordedExchange, Recording } from '../ledger/exchange-store';
import { normalisedRequest, requestKeyOf, sortedJson } from './exchange';

/** A recorded answer to give the agent again, as it got it then. */
export interface ReplayedAnswer {
  readonly kind: 'answer';
  readonly status: number;
  readonly answer: RecordedAnswer;
}

/** Why a request could not be answered from the recording: `message` starts "diverged at …". */
export interface Divergence {
  readonly kind: 'diverged';
  readonly message: string;
}

/** How much of a differing string is shown on each side of the first differing character. */
const EXCERPT_CHARS = 40;

export class ReplayBook {
  private readonly byPlace = new Map<string, RecordedExchange>();

  /** `recording` must have been read with its bodies (`recordingOf(id, { bodies: true })`). */
  constructor(readonly recording: Recording) {
    for (const exchange of recording.exchanges) this.byPlace.set(placeOf(exchange.stage, exchange.attempt, exchange.order), exchange);
  }

  /** The answer recorded for call `order` of `stage` attempt `attempt`, if `request` (redacted as recordings are) is the one made then. */
  answerFor(stage: string, attempt: number, order: number, request: string): ReplayedAnswer | Divergence {
    const at = `diverged at stage ${stage} attempt ${attempt} call ${order}`;
    const recorded = this.byPlace.get(placeOf(stage, attempt, order));
    if (!recorded) return { kind: 'diverged', message: `${at}: ${this.missing(stage, attempt, order)}` };
    if (!recorded.stored || !recorded.answer) return { kind: 'diverged', message: `${at}: the recording was capped before this call, so its answer was not kept` };
    // The body as it is stored now, not the key written beside it: an edited recording is matched
    // by what it says. A call whose body was not kept matches by its key, or its place alone.
    if (recorded.request === undefined) {
      if (recorded.requestKey !== undefined && requestKeyOf(request) !== recorded.requestKey) return { kind: 'diverged', message: `${at}: the request differs from the recorded one (whose body was not kept)` };
    } else {
      const then = comparable(recorded.request);
      const now = comparable(request);
      if (then.text !== now.text) return { kind: 'diverged', message: `${at}: the request differs from the recorded one: ${describeDifference(then.value, now.value)}` };
    }
    return { kind: 'answer', status: recorded.status, answer: recorded.answer };
  }

  /** What the original did where a replayed call has no recorded counterpart. */
  private missing(stage: string, attempt: number, order: number): string {
    const ofStage = this.recording.exchanges.filter((e) => e.stage === stage);
    if (ofStage.length === 0) return `the original made no model call in the ${stage} stage`;
    const ofAttempt = ofStage.filter((e) => e.attempt === attempt);
    if (ofAttempt.length === 0) return `the original ${stage} stage made calls only in attempt ${[...new Set(ofStage.map((e) => e.attempt))].join(', ')}`;
    return `the original attempt made ${ofAttempt.length} call${ofAttempt.length === 1 ? '' : 's'}; this one is call ${order}`;
  }
}

/**
 * A commit id, whole or abbreviated: 7 to 40 hex digits (an abbreviated one may be all digits; it
 * may follow a letter: the `n` of an escaped newline). The commits Warden makes during a replay
 * (its documents, the agent's edits) carry the replay's times, so their ids differ from the
 * original's though their content is the same: they are left out of the match.
 */
const COMMIT_ID = /(?<![0-9a-f])[0-9a-f]{7,40}(?![0-9a-f])/g;

/** A UUID: the ids a CLI gives its own messages and turns (Codex's `msg_…`), new each run. */
const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/gi;

/**
 * A duration as test runners print it: node's TAP `duration_ms: 0.93` and `# duration_ms 45.1`,
 * and a number of `ms` or `s` (`(0.93ms)`, `12 ms`, `in 1.2s`). A failed impl attempt's test
 * output is in the next attempt's prompt, and its times are new each run.
 */
const DURATION = /(?<=duration_ms:? *)\d+(?:\.\d+)?|(?<![\w.])\d+(?:\.\d+)? ?m?s\b/g;

/**
 * A request as it is matched: its JSON normalised as the matching key has it (exchange.ts), every
 * UUID, commit id and test time in its strings masked, aider's file listings in sorted order,
 * written with sorted keys; a body that is not JSON, as
 * its text.
 */
function comparable(body: string): { readonly value: unknown; readonly text: string } {
  const parsed = normalisedRequest(body);
  if (!parsed) return { value: body, text: body };
  const value = masked(parsed);
  return { value, text: sortedJson(value) };
}

/**
 * One file as aider shows it to the model: its path on a line, a fence line of three or more
 * backticks, the content, the same fence. aider lists its chat's files in the order of a Python
 * set of their absolute paths, which hold the intent's worktree (its id) and Python's hash seed,
 * new each run: the same files come in another order.
 */
const FILE_BLOCK = /\n([^\n`][^\n]*)\n(`{3,})\n[\s\S]*?\2\n/g;

/** `text` with each run of adjacent file blocks (FILE_BLOCK) in sorted order, so their order is left out of the match. */
export function withFileBlocksSorted(text: string): string {
  const blocks = [...text.matchAll(FILE_BLOCK)];
  if (blocks.length < 2) return text;
  let out = '';
  let at = 0;
  let run: string[] = [];
  const flush = (): void => {
    out += [...run].sort().join('');
    run = [];
  };
  for (const block of blocks) {
    if (block.index !== at) {
      flush();
      out += text.slice(at, block.index);
    }
    run.push(block[0]);
    at = block.index + block[0].length;
  }
  flush();
  return out + text.slice(at);
}

function masked(value: unknown): unknown {
  if (typeof value === 'string') return withFileBlocksSorted(value).replace(UUID, '<uuid>').replace(DURATION, '<time>').replace(COMMIT_ID, '<commit>');
  if (Array.isArray(value)) return value.map(masked);
  if (isObject(value)) return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, masked(v)]));
  return value;
}

function placeOf(stage: string, attempt: number, order: number): string {
  return `${stage}\u0000${attempt}\u0000${order}`;
}

/** The first difference between a recorded request and a replayed one (as `comparable` gives them), as "PATH: recorded X, now Y". */
function describeDifference(then: unknown, now: unknown): string {
  if (typeof then === 'string' || typeof now === 'string') return `the body is not the same text (${excerptPair(String(typeof then === 'string' ? then : sortedJson(then)), String(typeof now === 'string' ? now : sortedJson(now)))})`;
  return firstDifference(then, now, '') ?? 'the bodies differ only in what the matching key leaves out';
}

function firstDifference(then: unknown, now: unknown, path: string): string | undefined {
  const where = path || '(the body)';
  if (Array.isArray(then) && Array.isArray(now)) {
    for (let i = 0; i < Math.min(then.length, now.length); i++) {
      const found = firstDifference(then[i], now[i], `${path}[${i}]`);
      if (found) return found;
    }
    if (then.length !== now.length) return `${where}: recorded ${then.length} items, now ${now.length}`;
    return undefined;
  }
  if (isObject(then) && isObject(now)) {
    const keys = [...new Set([...Object.keys(then), ...Object.keys(now)])].sort();
    for (const key of keys) {
      const child = path ? `${path}.${key}` : key;
      if (!(key in now) || now[key] === undefined) return `${child}: recorded, now missing`;
      if (!(key in then) || then[key] === undefined) return `${child}: not recorded, now present`;
      const found = firstDifference(then[key], now[key], child);
      if (found) return found;
    }
    return undefined;
  }
  if (typeof then === 'string' && typeof now === 'string') return then === now ? undefined : `${where}: ${excerptPair(then, now)}`;
  if (JSON.stringify(then) === JSON.stringify(now)) return undefined;
  return `${where}: recorded ${short(JSON.stringify(then) ?? 'nothing')}, now ${short(JSON.stringify(now) ?? 'nothing')}`;
}

/** Both strings around their first differing character. */
function excerptPair(then: string, now: string): string {
  let i = 0;
  while (i < then.length && i < now.length && then[i] === now[i]) i++;
  const from = Math.max(0, i - EXCERPT_CHARS);
  const cut = (text: string): string => `${from > 0 ? '…' : ''}${text.slice(from, i + EXCERPT_CHARS)}${text.length > i + EXCERPT_CHARS ? '…' : ''}`;
  return `recorded ${JSON.stringify(cut(then))}, now ${JSON.stringify(cut(now))} (first difference at character ${i})`;
}

function short(text: string): string {
  return text.length > 2 * EXCERPT_CHARS ? `${text.slice(0, 2 * EXCERPT_CHARS)}…` : text;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return Boolean(value) && typeof value === 'object' && !Array.isArray(value);
}
