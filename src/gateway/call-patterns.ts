/**
 * Behaviour rules judged per model call of one lease (one agent attempt), as the gateway sees
 * them: the same call answered the same way again and again, the same error again and again, an
 * agent talking to itself without using its tools, A-B-A-B alternation, a context that keeps being
 * cut, input that keeps swelling, calls faster than any agent thinks. The behaviour monitor sees
 * one observation per activity attempt (3 to 5 a stage); these see every call.
 *
 * Pure: state in, state and findings out; times are passed in; no I/O. A rule reports once per
 * lease. Sequences that follow one conversation (self-talk, alternation, token counts) are kept per
 * thread — the calls with one model, system prompt and tool set — so a CLI's small side calls
 * (titles, command checks) between the main ones do not break or fake them.
 */

export type CallPatternRule = 'identical-loop' | 'error-loop' | 'self-talk' | 'alternation' | 'context-churn' | 'cost-escalation' | 'rapid-calls';

export interface CallPatternConfig {
  /** The same request answered the same way this often in a lease is a loop (halts). */
  readonly identicalCalls: number;
  /** The same client error (status and message) this often in a row is an error loop (halts). */
  readonly identicalErrors: number;
  /** Calls in a row of one thread that offer tools, call none, and grow the conversation. */
  readonly silentCalls: number;
  /** Full A-B cycles of the same two calls in a row, within one thread. */
  readonly alternationCycles: number;
  /** Times in a lease a thread's input tokens fell below `contextDropRatio` of the call before. */
  readonly contextDrops: number;
  readonly contextDropRatio: number;
  /** Calls in a row of one thread with strictly rising input tokens… */
  readonly escalationCalls: number;
  /** …the last at least this multiple of the first. */
  readonly escalationFactor: number;
  /** More calls than this starting within `rapidWindowMs`. */
  readonly rapidCalls: number;
  readonly rapidWindowMs: number;
}

export const DEFAULT_CALL_PATTERN_CONFIG: CallPatternConfig = {
  // An honest client retries a call once or twice; a poll gets a changing answer. Four is a loop.
  identicalCalls: 4,
  // One transient error is retried; the same 4xx four times means the agent is not reading it.
  identicalErrors: 4,
  // A CLI ends its turn on an answer without a tool call; eight such turns in a row is a monologue.
  silentCalls: 8,
  // Three full A-B-A-B cycles: two could be a check and a re-check, three is a flip-flop.
  alternationCycles: 3,
  // One or two compactions fit a long session; a third means the agent truncates in a loop.
  contextDrops: 3,
  // "More than half": a trim of old tool output cuts less, a compaction or restart cuts more.
  contextDropRatio: 0.5,
  // A conversation grows every call; tripling within eight calls is pulling in whole trees.
  escalationCalls: 8,
  escalationFactor: 3,
  // Model calls take seconds each; over 30 starting within 10 s is a client retrying in a tight loop.
  rapidCalls: 30,
  rapidWindowMs: 10_000,
};

/** What the gateway read of a request (see call-shape.ts). */
export interface RequestShape {
  /** A hash of what was asked (model, system, conversation, tools), volatile fields left out. */
  readonly hash: string;
  /** A hash of the model, system prompt and tools: which conversation the call belongs to. */
  readonly thread: string;
  readonly offersTools: boolean;
  /** Messages (or input items) the conversation holds. */
  readonly turns: number;
}

/** What the gateway read of an answer. */
export interface AnswerShape {
  /** A hash of its text and tool calls, ids left out. */
  readonly hash: string;
  readonly toolCalls: number;
  /** The prompt's input tokens as the provider reported them; undefined when not reported. */
  readonly inputTokens?: number;
}

export interface ErrorShape {
  readonly status: number;
  /** The provider's error message, volatile ids left out. */
  readonly message: string;
}

/** One call of a lease: when it arrived and how it ended. */
export interface CallObservation {
  readonly at: number;
  /** Absent when the request could not be read. */
  readonly request?: RequestShape;
  readonly answer?: AnswerShape;
  readonly error?: ErrorShape;
}

export interface CallFinding {
  readonly rule: CallPatternRule;
  readonly severity: 'high' | 'medium';
  /** The identical and error loops stop the attempt; the rest are recorded. */
  readonly halts: boolean;
  readonly reason: string;
  readonly suggestion: string;
  readonly metadata: Record<string, unknown>;
}

interface ThreadState {
  readonly lastTurns: number | null;
  readonly silent: number;
  readonly last: string | null;
  readonly beforeLast: string | null;
  /** Length of the alternating run ending at `last`. */
  readonly alternating: number;
  readonly lastTokens: number | null;
  /** Strictly rising run ending at `lastTokens`, its last `escalationCalls` values. */
  readonly rising: readonly number[];
}

export interface CallPatternState {
  readonly pairs: ReadonlyMap<string, number>;
  readonly errorRun: { readonly key: string; readonly count: number } | null;
  readonly threads: ReadonlyMap<string, ThreadState>;
  readonly drops: number;
  /** Start times of the latest calls, ascending. */
  readonly times: readonly number[];
  readonly reported: ReadonlySet<CallPatternRule>;
}

/** Bounds on what one lease keeps; the oldest goes first. */
const MAX_PAIRS = 1024;
const MAX_THREADS = 32;

export function emptyCallPatterns(): CallPatternState {
  return { pairs: new Map(), errorRun: null, threads: new Map(), drops: 0, times: [], reported: new Set() };
}

/**
 * Rate-limit, timeout and server errors are the endpoint's, retried by design and judged by the
 * circuit breaker: only an error the request itself causes can loop.
 */
export function isTransientStatus(status: number): boolean {
  return status === 408 || status === 409 || status === 425 || status === 429 || status >= 500;
}

/** Adds one call to a lease's state: the new state and the findings it causes (often none). */
export function observeCall(state: CallPatternState, call: CallObservation, config: CallPatternConfig = DEFAULT_CALL_PATTERN_CONFIG): { state: CallPatternState; findings: CallFinding[] } {
  const found: CallFinding[] = [];
  const times = insertTime(state.times, call.at, config.rapidCalls + 1);
  const rapid = times.length > config.rapidCalls && times[times.length - 1]! - times[0]! <= config.rapidWindowMs;
  if (rapid) found.push(rapidFinding(times.length, times[times.length - 1]! - times[0]!, config));

  let { pairs, errorRun, threads, drops } = state;
  if (call.error && !isTransientStatus(call.error.status)) {
    const key = `${call.error.status} ${call.error.message}`;
    errorRun = errorRun?.key === key ? { key, count: errorRun.count + 1 } : { key, count: 1 };
    if (errorRun.count >= config.identicalErrors) found.push(errorFinding(call.error, errorRun.count));
  }
  if (call.answer) errorRun = null;

  if (call.request && call.answer) {
    const { request, answer } = call;
    const pair = `${request.hash}:${answer.hash}`;
    const seen = (pairs.get(pair) ?? 0) + 1;
    pairs = bounded(pairs, pair, seen, MAX_PAIRS);
    if (seen >= config.identicalCalls) found.push(identicalFinding(seen));

    const before = threads.get(request.thread) ?? { lastTurns: null, silent: 0, last: null, beforeLast: null, alternating: 0, lastTokens: null, rising: [] };
    const growing = before.lastTurns === null || request.turns > before.lastTurns;
    const silent = request.offersTools && answer.toolCalls === 0 && growing ? before.silent + 1 : 0;
    if (silent >= config.silentCalls) found.push(silentFinding(silent));

    const alternates = before.last !== null && pair === before.beforeLast && pair !== before.last;
    const alternating = alternates ? Math.max(before.alternating, 2) + 1 : before.last !== null && pair !== before.last ? 2 : 1;
    if (alternating >= 2 * config.alternationCycles) found.push(alternationFinding(alternating));

    let { lastTokens, rising } = before;
    if (answer.inputTokens !== undefined) {
      const tokens = answer.inputTokens;
      if (lastTokens !== null && tokens < lastTokens * config.contextDropRatio) {
        drops += 1;
        if (drops >= config.contextDrops) found.push(churnFinding(drops, lastTokens, tokens));
      }
      rising = (lastTokens !== null && tokens > lastTokens ? [...rising, tokens] : [tokens]).slice(-config.escalationCalls);
      const first = rising[0]!;
      if (rising.length >= config.escalationCalls && tokens >= config.escalationFactor * first) found.push(escalationFinding(rising.length, first, tokens));
      lastTokens = tokens;
    }
    const after: ThreadState = { lastTurns: request.turns, silent, last: pair, beforeLast: before.last, alternating, lastTokens, rising };
    threads = bounded(threads, request.thread, after, MAX_THREADS);
  }

  const findings = found.filter((f) => !state.reported.has(f.rule));
  const reported = findings.length > 0 ? new Set([...state.reported, ...findings.map((f) => f.rule)]) : state.reported;
  return { state: { pairs, errorRun, threads, drops, times, reported }, findings };
}

/** `times` with `at` in order, only the latest `keep`. */
function insertTime(times: readonly number[], at: number, keep: number): number[] {
  const next = [...times];
  let i = next.length;
  while (i > 0 && next[i - 1]! > at) i -= 1;
  next.splice(i, 0, at);
  return next.slice(-keep);
}

/** `map` with `key` set (moved to the newest end), the oldest entries dropped past `max`. */
function bounded<V>(map: ReadonlyMap<string, V>, key: string, value: V, max: number): Map<string, V> {
  const next = new Map(map);
  next.delete(key);
  next.set(key, value);
  for (const oldest of next.keys()) {
    if (next.size <= max) break;
    next.delete(oldest);
  }
  return next;
}

function identicalFinding(seen: number): CallFinding {
  return {
    rule: 'identical-loop',
    severity: 'high',
    halts: true,
    reason: `the same request was answered the same way ${seen} times: the agent is in a loop, resending a call whose answer it does not act on`,
    suggestion: 'Read the agent’s log in the lineage: check that its tool results reach the model and that it appends each answer before calling again.',
    metadata: { identical: seen },
  };
}

function errorFinding(error: ErrorShape, count: number): CallFinding {
  return {
    rule: 'error-loop',
    severity: 'high',
    halts: true,
    reason: `the same error came back ${count} times in a row (HTTP ${error.status}: ${error.message.slice(0, 200)}): the agent resends a request the model refuses`,
    suggestion: 'Read the error in the model_calls rows of the attempt; fix the request the agent sends (tool schema, model name, context size) before retrying.',
    metadata: { status: error.status, message: error.message.slice(0, 500), inRow: count },
  };
}

function silentFinding(count: number): CallFinding {
  return {
    rule: 'self-talk',
    severity: 'medium',
    halts: false,
    reason: `${count} calls in a row offered tools, called none, and grew the conversation: the agent is talking to itself instead of acting`,
    suggestion: 'Look at the agent’s answers in the lineage: it may be asking itself to continue without doing anything; check its prompt and turn limit.',
    metadata: { silentCalls: count },
  };
}

function alternationFinding(steps: number): CallFinding {
  return {
    rule: 'alternation',
    severity: 'medium',
    halts: false,
    reason: `the agent alternated between the same two calls and answers for ${steps / 2} full cycles (A-B-A-B): it is flip-flopping`,
    suggestion: 'Look at the two answers in the lineage: the agent undoes one step with the other; narrow the task or settle the choice in the prompt.',
    metadata: { steps },
  };
}

function churnFinding(drops: number, from: number, to: number): CallFinding {
  return {
    rule: 'context-churn',
    severity: 'medium',
    halts: false,
    reason: `the prompt was cut by more than half ${drops} times (last from ${from} to ${to} input tokens): the agent compacts or truncates its context in a loop`,
    suggestion: 'The task may not fit the model’s context window: split it, or give the agent less to read at once.',
    metadata: { drops, fromTokens: from, toTokens: to },
  };
}

function escalationFinding(calls: number, first: number, last: number): CallFinding {
  return {
    rule: 'cost-escalation',
    severity: 'medium',
    halts: false,
    reason: `input tokens rose on each of ${calls} calls in a row, from ${first} to ${last} (${(last / first).toFixed(1)}×): the agent pulls ever more context in`,
    suggestion: 'Look at what the agent reads in the lineage: whole files or trees each turn cost more every call; point it at the few files the task needs.',
    metadata: { calls, firstTokens: first, lastTokens: last },
  };
}

function rapidFinding(calls: number, spanMs: number, config: CallPatternConfig): CallFinding {
  return {
    rule: 'rapid-calls',
    severity: 'medium',
    halts: false,
    reason: `${calls} model calls started within ${(spanMs / 1000).toFixed(1)} s (more than ${config.rapidCalls} in ${config.rapidWindowMs / 1000} s): the agent calls faster than it can read the answers`,
    suggestion: 'Check the agent’s retry and parallelism settings: it may retry without backing off.',
    metadata: { calls, spanMs },
  };
}
