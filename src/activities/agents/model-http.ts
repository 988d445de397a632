import { ApplicationFailure, CancelledFailure } from '@temporalio/common';
import { parseDuration } from '../../shared/duration';
import { FailureType } from '../../shared/errors';
import type { HttpAgentProfile } from '../../shared/intent';
import { inputTokenBound } from '../../safety/pricing';
import { baseUrlOf, isLocalEndpoint, modelNamed, PROVIDER_DEFAULTS } from '../../gateway/upstream';
import { BodyTooLargeError, readCapped } from '../../gateway/http-body';

export { baseUrlOf, isLocalEndpoint } from '../../gateway/upstream';
import type { Usage } from '../../gateway/usage';
import type { CallBound, CallReport, SpendMeter } from '../../gateway/spend-meter';

/**
 * One model call over HTTP, for the Anthropic Messages API and OpenAI-compatible Chat
 * Completions: the request, the retries (429 and 5xx, honouring `retry-after`), API keys tried in
 * turn on auth or quota errors, the response's model checked against the profile, the usage
 * read for the cost. Every request is a paid call of the attempt's meter: its maximum (the
 * prompt's token bound plus `max_tokens`, at the model's price) is reserved before it is sent, and
 * what the provider billed is counted after — also when the answer is then refused. The circuit breaker and rate limiter around it are the worker's
 * (agent-safety interceptor): a call that keeps failing surfaces as a retryable failure there.
 */

export interface ModelAnswer {
  readonly text: string;
  readonly usage: Usage;
  /** The model the answer names. */
  readonly model: string;
}

export interface ModelCallOptions {
  readonly env: NodeJS.ProcessEnv;
  readonly signal: AbortSignal;
  readonly heartbeat: () => void;
  /** Injected in tests; default: global fetch. */
  readonly fetch?: typeof fetch;
  /** Longest `retry-after` honoured, in ms (longer ones end the call with a retryable failure). */
  readonly maxRetryAfterMs?: number;
  /**
   * Reserves each request's maximum cost before it is sent and counts what it cost. Absent when
   * the request goes through the model gateway, which does both.
   */
  readonly meter?: SpendMeter;
}

/** Tries per key before the endpoint, not the key, is taken to be the problem. */
export const TRIES_PER_KEY = 3;
const DEFAULT_MAX_RETRY_AFTER_MS = 60_000;

/** The API keys to try, from the environment, in order. A local endpoint may need none. */
function keysOf(profile: HttpAgentProfile, env: NodeJS.ProcessEnv): Array<string | undefined> {
  const names = profile.apiKeyEnv ?? [...PROVIDER_DEFAULTS[profile.kind].keys];
  const keys = names.map((n) => env[n]).filter((k): k is string => Boolean(k && k.trim()));
  if (keys.length > 0) return keys;
  if (isLocalEndpoint(profile)) return [undefined];
  throw ApplicationFailure.create({
    type: FailureType.CredentialsExhausted,
    message: `no API key for ${profile.kind} model ${profile.model}: set ${names.join(' or ')} in the worker's environment`,
    nonRetryable: true,
  });
}

function request(profile: HttpAgentProfile, prompt: string, key: string | undefined): { url: string; init: RequestInit } {
  if (profile.kind === 'anthropic') {
    return {
      url: `${baseUrlOf(profile)}/v1/messages`,
      init: {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'anthropic-version': '2023-06-01', ...(key ? { 'x-api-key': key } : {}) },
        body: JSON.stringify({ model: profile.model, max_tokens: profile.maxTokens, messages: [{ role: 'user', content: prompt }] }),
      },
    };
  }
  return {
    url: `${baseUrlOf(profile)}/chat/completions`,
    init: {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(key ? { authorization: `Bearer ${key}` } : {}) },
      body: JSON.stringify({ model: profile.model, max_tokens: profile.maxTokens, messages: [{ role: 'user', content: prompt }] }),
    },
  };
}

/** Reads the provider's answer; undefined when the body is not the expected shape. */
function parseAnswer(profile: HttpAgentProfile, body: unknown): ModelAnswer | undefined {
  const b = body as Record<string, unknown> | null;
  if (!b || typeof b !== 'object' || typeof b.model !== 'string') return undefined;
  if (profile.kind === 'anthropic') {
    const content = b.content as Array<{ type?: string; text?: unknown }> | undefined;
    const usage = b.usage as { input_tokens?: unknown; output_tokens?: unknown } | undefined;
    if (!Array.isArray(content) || typeof usage?.input_tokens !== 'number' || typeof usage.output_tokens !== 'number') return undefined;
    const text = content.filter((c) => c.type === 'text' && typeof c.text === 'string').map((c) => c.text as string).join('');
    return { text, model: b.model, usage: { inputTokens: usage.input_tokens, outputTokens: usage.output_tokens } };
  }
  const choices = b.choices as Array<{ message?: { content?: unknown } }> | undefined;
  const usage = b.usage as { prompt_tokens?: unknown; completion_tokens?: unknown } | undefined;
  const text = choices?.[0]?.message?.content;
  if (typeof text !== 'string' || typeof usage?.prompt_tokens !== 'number' || typeof usage.completion_tokens !== 'number') return undefined;
  return { text, model: b.model, usage: { inputTokens: usage.prompt_tokens, outputTokens: usage.completion_tokens } };
}

/** Whether the answering model is the one asked for (a dated or aliased name counts). */
export function modelMatches(profile: HttpAgentProfile, answered: string): boolean {
  return modelNamed([profile.model, ...profile.modelAliases], answered);
}

/** `retry-after` in ms: seconds or an HTTP date; undefined when absent or unreadable. */
export function retryAfterMs(value: string | null, now = Date.now()): number | undefined {
  if (!value) return undefined;
  if (/^\d+(\.\d+)?$/.test(value.trim())) return Math.round(Number(value) * 1000);
  const at = Date.parse(value);
  return Number.isNaN(at) ? undefined : Math.max(0, at - now);
}

/** A quota or billing refusal (the key is spent), as opposed to a rate limit (wait and retry). */
function isQuotaError(text: string): boolean {
  return /insufficient_quota|quota|billing|credit balance/i.test(text);
}

type Outcome = { kind: 'answer'; answer: ModelAnswer } | { kind: 'next-key'; reason: string } | { kind: 'retry'; reason: string; waitMs: number };

export async function callModel(profile: HttpAgentProfile, prompt: string, options: ModelCallOptions): Promise<ModelAnswer> {
  const doFetch = options.fetch ?? fetch;
  const timeoutMs = parseDuration(profile.timeout);
  const maxRetryAfter = options.maxRetryAfterMs ?? DEFAULT_MAX_RETRY_AFTER_MS;
  const keys = keysOf(profile, options.env);

  /**
   * The answer, or why the key was refused (auth or quota); throws when the endpoint keeps failing.
   * Not cockatiel's `retry`: the waits are the server's (`retry-after`), not a backoff; a wait
   * longer than `maxRetryAfterMs` is handed to Temporal's retry instead of slept; and the sleep
   * must heartbeat the activity. Its retry would need a wrapper for each of the three.
   */
  const tryKey = async (key: string | undefined): Promise<ModelAnswer | { refused: string }> => {
    let lastProblem = '';
    for (let attempt = 1; attempt <= TRIES_PER_KEY; attempt++) {
      if (options.signal.aborted) throw new CancelledFailure('the model call was cancelled');
      options.heartbeat();
      const outcome = await tryOnce(profile, prompt, key, { doFetch, timeoutMs, signal: options.signal, meter: options.meter });
      if (outcome.kind === 'answer') return outcome.answer;
      if (outcome.kind === 'next-key') return { refused: outcome.reason };
      lastProblem = outcome.reason;
      if (attempt === TRIES_PER_KEY) break;
      if (outcome.waitMs > maxRetryAfter) {
        throw ApplicationFailure.create({
          type: FailureType.RateLimited,
          message: `${profile.kind} asks to wait ${Math.round(outcome.waitMs / 1000)} s: ${outcome.reason}`,
          nextRetryDelay: outcome.waitMs,
        });
      }
      await sleepAbortable(outcome.waitMs, options.signal, options.heartbeat);
    }
    // Three server-side failures on one key: the endpoint is the problem, not the key.
    throw ApplicationFailure.create({ type: FailureType.ModelUnavailable, message: `${profile.kind} model ${profile.model} failed ${TRIES_PER_KEY} times: ${lastProblem}` });
  };

  const refused: string[] = [];
  for (const [index, key] of keys.entries()) {
    const result = await tryKey(key);
    if (!('refused' in result)) return result;
    refused.push(`key ${index + 1}: ${result.refused}`);
  }
  throw ApplicationFailure.create({
    type: FailureType.CredentialsExhausted,
    message: `every API key for ${profile.kind} model ${profile.model} was refused (${refused.join('; ')}); the stage stops here`,
    nonRetryable: true,
  });
}

/**
 * One request, as one paid call of the meter. What was billed: an answer with its usage is
 * counted at that usage (a refused model included); an answer whose usage cannot be read
 * (malformed, oversize) at the request's maximum; no answer, or an error status, at nothing.
 */
async function tryOnce(
  profile: HttpAgentProfile,
  prompt: string,
  key: string | undefined,
  ctx: { doFetch: typeof fetch; timeoutMs: number; signal: AbortSignal; meter?: SpendMeter },
): Promise<Outcome> {
  const bound: CallBound = { kind: 'tokens', maxInputTokens: inputTokenBound(prompt), maxOutputTokens: profile.maxTokens };
  // What the provider billed if the request ends in an error from here on.
  let billed: CallReport = { kind: 'unpaid' };
  const attempt = async (): Promise<{ value: Outcome; report: CallReport }> => {
    const done = (value: Outcome, report: CallReport = { kind: 'unpaid' }) => ({ value, report });
    const { url, init } = request(profile, prompt, key);
    const timeout = AbortSignal.timeout(ctx.timeoutMs);
    let response: Response;
    let text: string;
    try {
      response = await ctx.doFetch(url, { ...init, signal: AbortSignal.any([ctx.signal, timeout]) });
      // A 200 is billed even if its body never arrives whole.
      if (response.status === 200) billed = { kind: 'paid-unknown', reason: 'the answer could not be read whole' };
      text = await readAnswerBody(response, profile.maxResponseBytes);
    } catch (error) {
      if (ctx.signal.aborted) throw new CancelledFailure('the model call was cancelled');
      if (error instanceof ApplicationFailure) throw error;
      const reason = timeout.aborted ? `no answer within ${profile.timeout}` : `request failed: ${(error as Error).message}`;
      return done({ kind: 'retry', reason, waitMs: 1000 }, billed);
    }
    const status = response.status;
    const summary = `HTTP ${status}: ${text.slice(0, 300)}`;
    if (status === 401 || status === 403) return done({ kind: 'next-key', reason: summary });
    if (status === 429) {
      if (isQuotaError(text)) return done({ kind: 'next-key', reason: summary });
      return done({ kind: 'retry', reason: summary, waitMs: retryAfterMs(response.headers.get('retry-after')) ?? 2000 });
    }
    if (status >= 500) return done({ kind: 'retry', reason: summary, waitMs: retryAfterMs(response.headers.get('retry-after')) ?? 1000 });
    if (status !== 200) {
      throw ApplicationFailure.create({ type: FailureType.AgentFailed, message: `${profile.kind} refused the request: ${summary}`, nonRetryable: status === 400 || status === 404 });
    }
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return done({ kind: 'retry', reason: `the answer is not JSON: ${text.slice(0, 200)}`, waitMs: 1000 }, { kind: 'paid-unknown', reason: 'the answer is not JSON' });
    }
    const answer = parseAnswer(profile, body);
    if (!answer) {
      return done({ kind: 'retry', reason: `the answer is not a ${profile.kind} response: ${text.slice(0, 200)}`, waitMs: 1000 }, { kind: 'paid-unknown', reason: `the answer is not a ${profile.kind} response` });
    }
    const paid: CallReport = { kind: 'paid', usage: answer.usage, model: answer.model };
    if (!modelMatches(profile, answer.model)) {
      billed = paid;
      throw ApplicationFailure.create({
        type: FailureType.ModelMismatch,
        message: `asked ${profile.model}, but ${answer.model} answered: refused (add it to modelAliases if it is the same model)`,
        nonRetryable: true,
      });
    }
    return done({ kind: 'answer', answer }, paid);
  };
  // Through the gateway the gateway meters the call; only a direct call is metered here.
  if (!ctx.meter) return (await attempt()).value;
  return ctx.meter.call(profile.model, bound, attempt, () => billed);
}

/** The body as text; an answer past `maxBytes` is refused for good. */
async function readAnswerBody(response: Response, maxBytes: number): Promise<string> {
  try {
    return await readCapped(response, maxBytes);
  } catch (error) {
    if (!(error instanceof BodyTooLargeError)) throw error;
    throw ApplicationFailure.create({ type: FailureType.AgentOutputTooLarge, message: `the model's answer passed ${maxBytes} bytes: refused`, nonRetryable: true });
  }
}

function sleepAbortable(ms: number, signal: AbortSignal, heartbeat: () => void): Promise<void> {
  return new Promise((resolve, reject) => {
    const beat = setInterval(heartbeat, 1000);
    const done = (): void => {
      clearInterval(beat);
      clearTimeout(timer);
      signal.removeEventListener('abort', onAbort);
    };
    const timer = setTimeout(() => {
      done();
      resolve();
    }, ms);
    const onAbort = (): void => {
      done();
      reject(new CancelledFailure('the model call was cancelled'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
}
