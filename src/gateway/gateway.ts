/**
 * The model gateway: the one road between an agent and its model. Each worker runs one, on a
 * loopback port and on a Unix socket (the socket is what a sandbox without a network is given).
 * An agent attempt gets a key of its own (`issue`); every request made with it is, in order:
 *
 * 1. authenticated (an unknown or ended key: 401) and read (malformed: 400, oversized: 413);
 * 2. checked against the attempt's allowed models (403);
 * 3. admitted by the rate limits per agent and model (429) and the endpoint's circuit (503);
 * 4. bounded: its output cap lowered to the upstream's, and that worst case reserved against the
 *    stage, intent, agent and day budgets before anything leaves (402 when one would pass);
 * 5. forwarded with the real key, which only the worker holds, its answer streamed back as it
 *    comes while its usage and text are read and screened (secrets redacted; a CRITICAL cascade
 *    ends the stream);
 * 6. settled at the usage the provider reported (a cut stream: at what was received) and written
 *    to the ledger as one `model_calls` row;
 * 7. judged with the attempt's earlier calls for loops and other patterns (call-patterns.ts);
 * 8. recorded, when the worker records exchanges: the request and the answer the agent got,
 *    redacted, written once at the call's end beside its row (exchange.ts, exchange-store.ts).
 *
 * An attempt of a replay (its lease names the intent it replays) goes through the same steps, but step 3
 * is skipped (no real endpoint is used, no real bucket drawn from), nothing is reserved or charged,
 * and step 5 takes the answer from the recording instead of the upstream (replay-book.ts): it is
 * screened, redacted and judged as a live one, so the safety layers decide on it as they would
 * now. A request the recording has no answer for halts the attempt ("diverged at …"). A replay's
 * own calls are not recorded again.
 *
 * Refusals are in the provider's own error shape. A refusal that cannot fix itself (a budget, a
 * forbidden model, a loop, a CRITICAL verdict) halts the attempt: the lease keeps refusing, and
 * the agent is stopped after a short grace or at once if it keeps calling.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { createHash, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { ApplicationFailure } from '@temporalio/common';
import type { Logger } from 'pino';
import type { WorkerSafetyConfig } from '../config/schema';
import type { ModelCallInput, SafetyEventInput } from '../ledger/types';
import type { ExchangeStore } from '../ledger/exchange-store';
import { detectCascade } from '../safety/cascade-detector';
import { SharedCircuitBreakers } from '../ledger/shared-circuits';
import type { SharedLimits } from '../ledger/shared-limits';
import { SharedRateLimiter } from '../ledger/shared-rate-limiter';
import { circuitEventOf } from '../safety/circuit-events';
import { circuitOptionsOf, CircuitBreakerRegistry, endpointKey, type CircuitBreakers } from '../safety/circuit-breaker';
import { inputTokenBound } from '../safety/pricing';
import { agentModelConfig, LocalRateLimits, OwedTokenLimits } from '../safety/rate-limits';
import { parseDuration } from '../shared/duration';
import { FailureType } from '../shared/errors';
import type { Redactor } from '../shared/redact';
import { redactionsIn } from '../shared/sandbox-attempts';
import type { SafetyEventType, Severity } from '../shared/safety-events';
import type { CircuitStateChange } from '../safety/circuit-state';
import { DEFAULT_CALL_PATTERN_CONFIG, observeCall, type CallFinding, type CallObservation, type CallPatternConfig } from './call-patterns';
import { errorShape, requestShape, StreamedAnswerShape, wholeAnswerShape } from './call-shape';
import { AnswerCapture, requestKeyOf } from './exchange';
import { readCapped } from './http-body';
import { Lease, type LeaseSpec } from './lease';
import { ReplayBook, type ReplayedAnswer } from './replay-book';
import { answerNow, swapped } from './replay-names';
import type { CallReport, OpenCall } from './spend-meter';
import { isLocalEndpoint, modelNamed } from './upstream';
import {
  errorBody,
  errorEvent,
  parseModelRequest,
  providerOf,
  readAnswer,
  routeOf,
  SseSplitter,
  SseUsageReader,
  statusOf,
  upstreamBody,
  type Dialect,
  type ModelRequest,
  type RefusalKind,
} from './wire';

/** The breaker and rate-limit settings the gateway applies: the worker's config. */
export interface GatewayLimits {
  readonly circuitBreaker: WorkerSafetyConfig['circuitBreaker'];
  readonly rateLimits: Pick<WorkerSafetyConfig['rateLimits'], 'perAgent' | 'perModel'>;
  /** Thresholds of the per-call pattern rules; each one left out is DEFAULT_CALL_PATTERN_CONFIG's. */
  readonly callPatterns?: WorkerSafetyConfig['callPatterns'];
}

export interface GatewayOptions {
  readonly limits: GatewayLimits;
  readonly logger: Logger;
  /** Where the upstream keys are read (the worker's environment); default `process.env`. */
  readonly env?: NodeJS.ProcessEnv;
  /** Applied to every answer on its way to the agent. */
  readonly redact?: Redactor;
  /** Writes one row per request (the ledger's `modelCalls.record`); without it rows are only logged. */
  readonly recordCall?: (row: ModelCallInput) => Promise<unknown>;
  /**
   * Writes a SafetyEvent that belongs to no attempt (a call with an unknown or ended key: whose
   * it is cannot be known); the ledger's `recordSafetyEvent`. Without it such refusals are only logged.
   */
  readonly recordEvent?: (event: SafetyEventInput) => Promise<unknown>;
  /** Keeps each call's request and answer for replay (config `worker.recording`); without it nothing is recorded. */
  readonly exchanges?: Pick<ExchangeStore, 'record'>;
  /** Where a replayed attempt's recording is read (the ledger's); without it a replayed call diverges at once. */
  readonly recordings?: Pick<ExchangeStore, 'recordingOf'>;
  /** Told each move of an endpoint's circuit this gateway makes (the worker's metrics). */
  readonly onCircuitChange?: (change: CircuitStateChange) => void;
  readonly fetch?: typeof fetch;
  /**
   * Where the rate buckets and the endpoints' circuits are shared with every other worker (the
   * ledger's database; a worker always has one). Without it they are this gateway's own, in memory.
   */
  readonly shared?: SharedLimits;
  /** Loopback port (0: any free one). */
  readonly port?: number;
  /** Largest request body accepted, bytes; default 8 MiB. */
  readonly maxRequestBytes?: number;
  /** Calls after a halt before the agent is stopped at once; default 2. */
  readonly maxCallsAfterHalt?: number;
  /** How long a halted agent may take to stop by itself; default 10 s. */
  readonly haltGraceMs?: number;
  /** Failed calls in a row (refused or upstream errors) that make an error loop; default 8. */
  readonly maxFailuresInRow?: number;
  /**
   * For a gateway nobody closes (a worker built without one): it does not keep the process
   * alive, and its socket folder is removed when the process exits.
   */
  readonly detached?: boolean;
}

/** The streamed text's length at which the cascade detector first looks at it (then at each doubling, and at the end). */
const SCREEN_FIRST_CHARS = 256;
const DEFAULT_MAX_REQUEST_BYTES = 8 * 1024 * 1024;
/** The least output a call whose cap the gateway chooses is given; below it the call is refused (402). */
const MIN_OUTPUT_TOKENS = 1024;

/** A refusal on its way to the agent. */
class Refusal extends Error {
  constructor(
    readonly kind: RefusalKind,
    message: string,
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}

export class ModelGateway {
  private readonly leases = new Map<string, Lease>();
  private readonly breakers: CircuitBreakers;
  /** The circuit moves the upstream request running here made, for its lease's attempt to record. */
  private readonly circuitChanges = new AsyncLocalStorage<CircuitStateChange[]>();
  private readonly limiter: OwedTokenLimits;
  private readonly failuresInRow = new WeakMap<Lease, number>();
  /** Calls each attempt has made so far: a call's order in its attempt. */
  private readonly callsMade = new WeakMap<Lease, number>();
  private readonly patterns: CallPatternConfig;
  /** Each replayed attempt's recording, read once at its first call. */
  private readonly books = new WeakMap<Lease, Promise<ReplayBook | undefined>>();

  private constructor(
    private readonly options: GatewayOptions,
    private readonly servers: readonly Server[],
    /** `http://127.0.0.1:PORT`: the gateway as the host sees it. */
    readonly url: string,
    /** The Unix socket a sandbox reaches the gateway through. */
    readonly socketPath: string,
    private readonly socketDir: string,
  ) {
    const circuitOptions = {
      ...circuitOptionsOf(options.limits.circuitBreaker),
      onStateChange: (change: CircuitStateChange) => {
        options.logger.warn({ circuit: change }, `circuit ${change.endpoint}: ${change.from} -> ${change.to}`);
        this.circuitChanges.getStore()?.push(change);
        options.onCircuitChange?.(change);
      },
    };
    const rateConfig = agentModelConfig(options.limits.rateLimits);
    const { shared } = options;
    this.breakers = shared
      ? new SharedCircuitBreakers(shared.store, {
          ...circuitOptions,
          scope: shared.scope,
          onRecordError: (error, endpoint) => options.logger.error({ err: error, endpoint }, 'gateway: could not record a call in its shared circuit'),
        })
      : new CircuitBreakerRegistry(circuitOptions);
    this.limiter = new OwedTokenLimits(shared ? new SharedRateLimiter(shared.store, rateConfig, shared.scope) : new LocalRateLimits(rateConfig), options.limits.rateLimits);
    const { rapidWindow, ...counts } = options.limits.callPatterns ?? {};
    this.patterns = { ...DEFAULT_CALL_PATTERN_CONFIG, ...counts, ...(rapidWindow ? { rapidWindowMs: parseDuration(rapidWindow) } : {}) };
  }

  /** Starts a gateway on a loopback port and a fresh Unix socket. */
  static async start(options: GatewayOptions): Promise<ModelGateway> {
    const socketDir = mkdtempSync(path.join(os.tmpdir(), 'warden-gateway-'));
    const socketPath = path.join(socketDir, 'gateway.sock');
    // The servers exist before the gateway that handles their requests.
    const ready: { gateway?: ModelGateway } = {};
    const handler = (req: IncomingMessage, res: ServerResponse): void => {
      void ready.gateway?.handle(req, res);
    };
    const tcp = createServer(handler);
    const unix = createServer(handler);
    await new Promise<void>((resolve, reject) => {
      tcp.once('error', reject);
      tcp.listen(options.port ?? 0, '127.0.0.1', () => resolve());
    });
    await new Promise<void>((resolve, reject) => {
      unix.once('error', reject);
      unix.listen(socketPath, () => resolve());
    });
    const { port } = tcp.address() as AddressInfo;
    if (options.detached) {
      tcp.unref();
      unix.unref();
      process.once('exit', () => rmSync(socketDir, { recursive: true, force: true }));
    }
    const gateway = new ModelGateway(options, [tcp, unix], `http://127.0.0.1:${port}`, socketPath, socketDir);
    ready.gateway = gateway;
    options.logger.info({ url: gateway.url, socket: socketPath }, 'model gateway listening');
    return gateway;
  }

  /** A key for one agent attempt; `lease.end()` revokes it. */
  issue(spec: LeaseSpec): Lease {
    const lease = new Lease(spec, (ended) => this.leases.delete(ended.key));
    this.leases.set(lease.key, lease);
    return lease;
  }

  /** Leases not yet ended. */
  get openLeases(): number {
    return this.leases.size;
  }

  async close(): Promise<void> {
    for (const server of this.servers) server.closeAllConnections();
    await Promise.all(this.servers.map((server) => new Promise<void>((resolve) => server.close(() => resolve()))));
    rmSync(this.socketDir, { recursive: true, force: true });
  }

  private async handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const url = new URL(req.url ?? '/', 'http://gateway');
    const route = routeOf(url.pathname);
    // Before the route is known, an Anthropic client is told by its header.
    const family = route ? providerOf(route.dialect) : req.headers['x-api-key'] !== undefined ? 'anthropic' : 'openai';
    const key = keyOf(req);
    const lease = key === undefined ? undefined : this.leases.get(key);
    if (!lease) {
      req.resume();
      this.options.logger.warn({ path: url.pathname, keyGiven: key !== undefined }, 'gateway: call with an unknown or ended key refused');
      // The key is not written down (it could be a real one sent to the wrong place): only a hash of it.
      await this.options
        .recordEvent?.({
          id: randomUUID(),
          timestamp: new Date(),
          eventType: 'MODEL_CALL_REFUSED',
          severity: 'medium',
          reason: `a ${req.method ?? 'GET'} ${url.pathname} came to the model gateway with ${key === undefined ? 'no key' : 'a key that is unknown or whose attempt has ended'}: refused (401)`,
          suggestion: 'Only agents Warden starts hold gateway keys, each for one attempt. A refused call after its attempt ended is a process the agent left behind; any other is something on this machine probing the gateway.',
          metadata: { path: url.pathname, keyHash: key === undefined ? null : createHash('sha256').update(key).digest('hex').slice(0, 16) },
        })
        .catch((error: unknown) => this.options.logger.error({ err: error }, 'gateway: could not record a safety event'));
      send(res, family, new Refusal('unknown-key', key === undefined ? 'no API key: this gateway serves only the keys Warden issues to agent attempts' : 'unknown key: not one Warden issued, or the agent attempt it was issued to has ended'));
      return;
    }
    if (req.method !== 'POST' || !route) {
      req.resume();
      send(res, family, new Refusal('not-found', `${req.method ?? 'GET'} ${url.pathname} is not served here: the gateway forwards POST /v1/chat/completions, /v1/responses and /v1/messages`));
      return;
    }
    await lease.track(this.call(lease, route.dialect, `${route.upstreamPath}${url.search}`, req, res));
  }

  /** One call of a leased attempt, from its request to its ledger row. */
  private async call(lease: Lease, dialect: Dialect, upstreamPath: string, req: IncomingMessage, res: ServerResponse): Promise<void> {
    const started = performance.now();
    const family = providerOf(dialect);
    const order = (this.callsMade.get(lease) ?? 0) + 1;
    this.callsMade.set(lease, order);
    const capture = this.options.exchanges && !lease.spec.replayOf ? new AnswerCapture(res) : undefined;
    let requestText: string | undefined;
    const row: Omit<ModelCallInput, 'status' | 'outcome' | 'latencyMs'> = {
      id: randomUUID(),
      timestamp: new Date(),
      intentId: lease.spec.intentId,
      stage: lease.spec.stage,
      attempt: lease.spec.attempt,
      agentId: lease.spec.agentId,
      api: dialect,
      modelId: lease.spec.upstream.models[0] ?? 'unknown',
      streamed: false,
      inputTokens: 0,
      outputTokens: 0,
      usd: '0',
      estimated: false,
    };
    let written: Partial<ModelCallInput> = {};
    // A call that comes after a halt is refused for it, and judged no more.
    const judged = !lease.halt;
    let observation: CallObservation = { at: Date.now() };
    try {
      const text = await readBody(req, this.options.maxRequestBytes ?? DEFAULT_MAX_REQUEST_BYTES);
      requestText = text;
      const request = await this.admit(lease, dialect, text);
      observation = { ...observation, request: requestShape(dialect, request.body) };
      written = { modelId: request.model, streamed: request.stream };
      const replayed = lease.spec.replayOf ? await this.replayed(lease, order, text) : undefined;
      const { seen, ...result } = await this.forward(lease, dialect, upstreamPath, request, text, req, res, replayed);
      observation = { ...observation, ...seen };
      written = { ...written, ...result };
      this.failuresInRow.set(lease, result.outcome === 'answered' ? 0 : (this.failuresInRow.get(lease) ?? 0) + 1);
    } catch (error) {
      const refusal = error instanceof Refusal ? error : new Refusal('upstream', `the call failed in the gateway: ${(error as Error).message}`);
      if (!(error instanceof Refusal)) this.options.logger.error({ err: error }, 'gateway: call failed');
      // The refusals whose event was not written where they were decided: a request the gateway could not take.
      if (refusal.kind === 'bad-request' || refusal.kind === 'too-large' || refusal.kind === 'not-found') {
        await this.event(lease, 'MODEL_CALL_REFUSED', 'low', `a ${dialect} request was refused (${statusOf(refusal.kind)}): ${refusal.message}`, { key: `request:${row.id}`, metadata: { status: statusOf(refusal.kind), api: dialect } });
      }
      send(res, family, refusal);
      written = { ...written, status: statusOf(refusal.kind), outcome: 'refused', refusal: `${refusal.kind}: ${refusal.message}` };
      observation = { ...observation, error: { status: statusOf(refusal.kind), message: refusal.message } };
      this.failuresInRow.set(lease, (this.failuresInRow.get(lease) ?? 0) + 1);
    }
    if (judged) await this.judge(lease, observation);
    await this.checkErrorLoop(lease);
    const complete: ModelCallInput = {
      ...row,
      status: 0,
      outcome: 'failed',
      ...written,
      latencyMs: Math.round(performance.now() - started),
    } as ModelCallInput;
    await Promise.all([this.record(complete), capture ? this.keepExchange(lease, complete, order, requestText, capture) : undefined]);
  }

  /** Step 8: the call's request and answer, redacted, kept for replay; the intent's first call past its cap says so once. */
  private async keepExchange(lease: Lease, row: ModelCallInput, order: number, requestText: string | undefined, capture: AnswerCapture): Promise<void> {
    const { spec } = lease;
    const redact = this.options.redact ?? ((text: string) => text);
    const request = requestText === undefined ? undefined : redact(requestText);
    try {
      const kept = await this.options.exchanges!.record({
        callId: row.id,
        intentId: spec.intentId,
        stage: spec.stage,
        attempt: spec.attempt,
        order,
        ...(request === undefined ? {} : { request, requestKey: requestKeyOf(request) }),
        answer: capture.answer(redact),
        status: row.status,
      });
      if (kept.newlyCapped) {
        await this.event(lease, 'RECORDING_CAPPED', 'low', `the intent's recording of model exchanges reached its size cap at ${spec.stage} attempt ${spec.attempt}: later calls are made and counted, their bodies no longer kept`, {
          key: 'recording-capped',
          suggestion: 'Raise worker.recording.maxPerIntentMb to record whole intents of this size; a capped recording cannot replay the calls past the cap.',
          metadata: { call: row.id, order },
        });
      }
    } catch (error) {
      this.options.logger.error({ err: error, call: row.id }, 'gateway: could not record a model exchange');
    }
  }

  /** A replayed call's recorded answer; a request the recording has none for halts the attempt. */
  private async replayed(lease: Lease, order: number, text: string): Promise<ReplayedAnswer> {
    const { spec } = lease;
    const redact = this.options.redact ?? ((body: string) => body);
    let book = this.books.get(lease);
    if (!book) {
      const { recordings } = this.options;
      book = recordings ? recordings.recordingOf(spec.replayOf!.intentId, { bodies: true }).then((recording) => new ReplayBook(recording)) : Promise.resolve(undefined);
      this.books.set(lease, book);
    }
    const found = (await book)
      // Recordings keep requests redacted: the replayed one is compared as it would have been kept.
      ?.answerFor(spec.stage, spec.attempt, order, redact(swapped(text, spec.replayOf!.substitutions ?? [], 'then'))) ?? { kind: 'diverged' as const, message: `diverged at stage ${spec.stage} attempt ${spec.attempt} call ${order}: this worker reads no recordings` };
    if (found.kind === 'answer') return answerNow(found, spec.replayOf!.substitutions ?? []);
    this.options.logger.warn({ intentId: spec.intentId, stage: spec.stage, attempt: spec.attempt, order }, `gateway: ${found.message}`);
    lease.haltWith({ kind: 'halted', message: found.message, failure: ApplicationFailure.create({ type: FailureType.ReplayDiverged, message: found.message, nonRetryable: true }) }, this.graceMs);
    throw new Refusal('halted', found.message);
  }

  /** Steps 1-3 and the halts: the parsed request, or a Refusal. */
  private async admit(lease: Lease, dialect: Dialect, text: string): Promise<ModelRequest> {
    const { spec } = lease;
    if (lease.halt) {
      lease.callsAfterHalt += 1;
      if (lease.callsAfterHalt > (this.options.maxCallsAfterHalt ?? 2)) {
        await this.event(lease, 'ANOMALY_DETECTED', 'high', `the ${spec.stage} agent kept calling after it was told to stop (${lease.callsAfterHalt} calls): it is stopped now`, {
          key: 'calls-after-halt',
          suggestion: 'The agent ignores the gateway’s refusals; check its retry settings.',
        });
        lease.stopNow();
      }
      throw new Refusal(lease.halt.kind, `${lease.halt.message} (this attempt is halted: stop)`);
    }
    const parsed = parseModelRequest(dialect, text);
    if ('problem' in parsed) throw new Refusal('bad-request', parsed.problem);
    const family = providerOf(dialect);
    if (family !== spec.upstream.kind) {
      throw new Refusal('not-found', `this agent's model is reached through the ${spec.upstream.kind === 'anthropic' ? 'Anthropic Messages API (/v1/messages)' : 'OpenAI APIs (/v1/chat/completions, /v1/responses)'}`);
    }
    if (!modelNamed(spec.upstream.models, parsed.model) || (spec.forbiddenModels ?? []).some((m) => modelNamed([m], parsed.model))) {
      const allowed = spec.upstream.models.join(', ');
      const message = `model ${parsed.model} is not allowed for the ${spec.stage} stage (allowed: ${allowed})`;
      await this.event(lease, 'MODEL_CALL_REFUSED', 'high', message, { key: `model:${parsed.model}`, suggestion: `Ask for ${allowed}, or change the stage's agent profile.`, metadata: { model: parsed.model, allowed: spec.upstream.models } });
      this.haltLease(lease, 'model', message, FailureType.ModelMismatch);
      throw new Refusal('model', message);
    }
    // A replay uses no real endpoint: neither a rate bucket nor an endpoint's circuit is its to draw on.
    if (spec.replayOf) return parsed;
    const admitted = await this.limiter.take(spec.agentId, parsed.model);
    if (!admitted.ok) {
      const which = admitted.refusals.map((r) => `${r.scope} ${r.key} ${r.limit}/min`).join(', ');
      await this.event(lease, 'RATE_LIMIT_BLOCK', 'low', `rate limit at the gateway: ${which}; the call may be retried in ${admitted.retryAfterMs} ms`, { key: `rate:${Date.now()}`, metadata: { retryAfterMs: admitted.retryAfterMs } });
      throw new Refusal('rate', `rate limit reached (${which}); retry in ${Math.ceil(admitted.retryAfterMs / 1000)} s`, admitted.retryAfterMs);
    }
    const endpoint = this.endpointOf(lease, parsed.model);
    const circuit = await this.breakers.status(endpoint);
    const waitMs = circuit.retryAfterMs;
    if (circuit.state !== 'CLOSED' && waitMs > 0) {
      await this.event(lease, 'MODEL_CALL_REFUSED', 'medium', `the circuit for ${endpoint} is open: the call is refused for ${Math.ceil(waitMs / 1000)} s`, { key: `breaker:${Date.now()}`, breakerId: endpoint });
      throw new Refusal('breaker', `the model endpoint is failing and its circuit is open; retry in ${Math.ceil(waitMs / 1000)} s`, waitMs);
    }
    return parsed;
  }

  /** Steps 4-6: reserve, forward, stream back, settle. What the row records of it. */
  private async forward(
    lease: Lease,
    dialect: Dialect,
    upstreamPath: string,
    request: ModelRequest,
    text: string,
    req: IncomingMessage,
    res: ServerResponse,
    replayed?: ReplayedAnswer,
  ): Promise<Pick<ModelCallInput, 'status' | 'outcome' | 'inputTokens' | 'outputTokens' | 'usd' | 'estimated'> & { refusal?: string; modelId?: string; seen: Pick<CallObservation, 'answer' | 'error'> }> {
    const { spec } = lease;
    const { upstream } = spec;
    const asked = Math.min(request.maxTokens ?? upstream.maxTokens, upstream.maxTokens);
    // A cap the client left out or set above the profile's is the gateway's to choose: as much as
    // the budgets still allow, down to a useful minimum. One it set within bounds is kept or refused.
    const shrinkable = request.maxTokens === undefined || request.maxTokens > upstream.maxTokens;
    const inputBound = inputTokenBound(text);
    let open: OpenCall;
    try {
      // A replayed answer costs nothing: nothing is reserved against any budget.
      open = replayed ? { index: -1, model: request.model, maxUsd: '0', bounded: true } : await spec.meter.reserve(request.model, {
        kind: 'tokens',
        maxInputTokens: inputBound,
        maxOutputTokens: asked,
        ...(shrinkable ? { minOutputTokens: Math.min(MIN_OUTPUT_TOKENS, asked) } : {}),
      });
    } catch (error) {
      if (error instanceof ApplicationFailure && (error.type === FailureType.BudgetExceeded || error.type === FailureType.SafetyHalt)) {
        lease.haltWith({ kind: 'budget', message: error.message, failure: error }, this.graceMs);
        throw new Refusal('budget', error.message);
      }
      if (error instanceof ApplicationFailure && error.type === FailureType.UnknownModel) {
        lease.haltWith({ kind: 'model', message: error.message, failure: error }, this.graceMs);
        throw new Refusal('model', error.message);
      }
      throw error;
    }
    const maxTokens = open.maxOutputTokens ?? asked;

    const clientGone = new AbortController();
    // Also after a whole answer: aborting a finished request does nothing.
    res.on('close', () => clientGone.abort());
    const signal = AbortSignal.any([clientGone.signal, lease.endSignal, lease.stopSignal, AbortSignal.timeout(upstream.timeoutMs)]);
    const { body, usageAsked } = upstreamBody(dialect, request, maxTokens);
    const endpoint = this.endpointOf(lease, request.model);
    // Until an answer is known, nothing was billed.
    let report: CallReport = { kind: 'unpaid' };
    let estimated = false;
    try {
      const response = replayed ? recordedResponse(replayed) : await this.sendUpstream(lease, endpoint, `${upstream.baseUrl}${upstreamPath}`, body, req, signal);
      if (response.status !== 200) {
        const errorText = await readCapped(response, 64 * 1024).catch(() => '');
        return { ...(await this.passError(res, dialect, response, errorText)), inputTokens: 0, outputTokens: 0, usd: '0', estimated: false, seen: { error: errorShape(response.status, errorText) } };
      }
      const streamed = (response.headers.get('content-type') ?? '').includes('text/event-stream');
      if (streamed) {
        const reader = new SseUsageReader(dialect, usageAsked);
        const shape = new StreamedAnswerShape(dialect);
        const outcome = await this.relayStream(lease, dialect, response, reader, shape, res);
        const usage = reader.usage();
        if (reader.finished && usage.input !== undefined && usage.output !== undefined && outcome === 'whole') {
          report = { kind: 'paid', usage: { inputTokens: usage.input, outputTokens: usage.output }, model: reader.model };
        } else {
          // Cut: what arrived is what is known. Input unknown → its bound; output unknown → the bytes received (≥ the tokens).
          estimated = true;
          const output = usage.output ?? Buffer.byteLength(reader.text);
          report = { kind: 'paid', usage: { inputTokens: usage.input ?? inputBound, outputTokens: Math.min(output, maxTokens) }, model: reader.model };
        }
        const paid = await this.settle(lease, open, report);
        const seen = outcome === 'whole' ? { answer: shape.shape(estimated ? undefined : paid.inputTokens) } : {};
        return { status: 200, outcome: outcome === 'whole' ? 'answered' : outcome === 'screened' ? 'refused' : 'cut', ...(outcome === 'screened' ? { refusal: 'screened: CRITICAL cascade' } : {}), ...paid, estimated, seen };
      }
      let answerText: string;
      try {
        answerText = await readCapped(response, upstream.maxResponseBytes);
      } catch {
        report = { kind: 'paid-unknown', reason: `the answer passed ${upstream.maxResponseBytes} bytes` };
        const paid = await this.settle(lease, open, report);
        send(res, providerOf(dialect), new Refusal('upstream', `the model's answer passed ${upstream.maxResponseBytes} bytes: refused`));
        return { status: statusOf('upstream'), outcome: 'failed', refusal: 'answer too large', ...paid, estimated: true, seen: {} };
      }
      const answer = readAnswer(dialect, answerText);
      report = answer.usage ? { kind: 'paid', usage: answer.usage, model: answer.model } : { kind: 'paid-unknown', reason: 'the answer reports no usage' };
      const paid = await this.settle(lease, open, report);
      if (await this.screen(lease, answer.text)) {
        send(res, providerOf(dialect), new Refusal('halted', 'the answer was stopped by Warden’s screening (CRITICAL)'));
        return { status: statusOf('halted'), outcome: 'refused', refusal: 'screened: CRITICAL cascade', ...paid, estimated: !answer.usage, seen: {} };
      }
      const out = this.options.redact ? this.options.redact(answerText) : answerText;
      lease.redactions += redactionsIn(answerText, out);
      res.writeHead(200, { 'content-type': response.headers.get('content-type') ?? 'application/json' });
      res.end(out);
      return { status: 200, outcome: 'answered', ...paid, estimated: !answer.usage, seen: { answer: wholeAnswerShape(dialect, answerText, answer.usage?.inputTokens) } };
    } catch (error) {
      // Nothing came back (refused, unreachable, cancelled): the reservation is released; a stream cut
      // mid-way was settled above and does not land here.
      await this.settle(lease, open, report);
      if (error instanceof Refusal) throw error;
      const why = signal.aborted && !clientGone.signal.aborted && !lease.endSignal.aborted ? `no answer within ${Math.round(upstream.timeoutMs / 1000)} s` : (error as Error).message;
      throw new Refusal('upstream', `the model endpoint failed: ${why}`);
    }
  }

  /** The request to the upstream through its circuit, trying each real key in turn on auth or quota errors. */
  private async sendUpstream(lease: Lease, endpoint: string, url: string, body: string, req: IncomingMessage, signal: AbortSignal): Promise<Response> {
    const { upstream } = lease.spec;
    const env = this.options.env ?? process.env;
    const keys: Array<string | undefined> = upstream.apiKeyEnv.map((name) => env[name]).filter((k): k is string => Boolean(k && k.trim()));
    if (keys.length === 0) {
      if (!isLocalEndpoint(upstream)) {
        const message = `the worker has no key for ${upstream.kind} at ${upstream.baseUrl}: set ${upstream.apiKeyEnv.join(' or ')} in the worker's environment`;
        this.haltLease(lease, 'upstream', message, FailureType.CredentialsExhausted);
        throw new Refusal('upstream', message);
      }
      keys.push(undefined);
    }
    const doFetch = this.options.fetch ?? fetch;
    for (const [index, key] of keys.entries()) {
      const changes: CircuitStateChange[] = [];
      let response: Response;
      try {
        response = await this.circuitChanges
          .run(changes, () =>
            this.breakers.execute(endpoint, async () => {
              // A redirect is refused, not followed: it would carry the real key to another host.
              const answer = await doFetch(url, { method: 'POST', headers: upstreamHeaders(upstream.kind, req, key), body, signal, redirect: 'error' });
              // A server error counts against the endpoint; the answer is still handed back as it is.
              if (answer.status >= 500) throw new UpstreamStatus(answer);
              return answer;
            }),
          )
          .catch((error: unknown) => {
            if (error instanceof UpstreamStatus) return error.response;
            throw error;
          });
      } finally {
        // Each move of the endpoint's circuit is a row of the attempt whose call made it.
        for (const change of changes) {
          const { type, severity, reason, ...details } = circuitEventOf(change);
          await this.event(lease, type, severity, reason, { ...details, key: `${details.key}:${change.at}` });
        }
      }
      // The upstream refused the worker's key, not the agent's request: the next key, if any.
      const keyRefused = response.status === 401 || response.status === 403;
      if (keyRefused && index < keys.length - 1) {
        await response.body?.cancel().catch(() => undefined);
        continue;
      }
      if (keyRefused) {
        await response.body?.cancel().catch(() => undefined);
        const message = `the ${upstream.kind} endpoint refused every key the worker has (${upstream.apiKeyEnv.join(', ')}): HTTP ${response.status}`;
        this.haltLease(lease, 'upstream', message, FailureType.CredentialsExhausted);
        throw new Refusal('upstream', message);
      }
      return response;
    }
    throw new Refusal('upstream', 'no key to try');
  }

  /** An upstream error passed to the agent as the provider worded it (5xx and 429 keep their retry-after). */
  private async passError(res: ServerResponse, dialect: Dialect, response: Response, errorText: string): Promise<{ status: number; outcome: 'failed'; refusal: string }> {
    const headers: Record<string, string> = { 'content-type': response.headers.get('content-type') ?? 'application/json' };
    const retryAfter = response.headers.get('retry-after');
    if (retryAfter) headers['retry-after'] = retryAfter;
    res.writeHead(response.status, headers);
    res.end(errorText || errorBody(providerOf(dialect), 'upstream', `the model endpoint answered HTTP ${response.status}`));
    return { status: response.status, outcome: 'failed', refusal: `upstream HTTP ${response.status}: ${errorText.slice(0, 200)}` };
  }

  /** Streams the answer to the agent event by event, reading and screening it on the way. */
  private async relayStream(lease: Lease, dialect: Dialect, response: Response, reader: SseUsageReader, shape: StreamedAnswerShape, res: ServerResponse): Promise<'whole' | 'cut' | 'screened'> {
    const splitter = new SseSplitter();
    res.writeHead(200, { 'content-type': response.headers.get('content-type') ?? 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    let screenedAt = 0;
    let nextScreen = SCREEN_FIRST_CHARS;
    const stop = (kind: RefusalKind, message: string): void => {
      if (!res.destroyed) res.end(errorEvent(dialect, kind, message));
    };
    const redactor = this.options.redact ?? ((text: string) => text);
    const redact = (text: string): string => {
      const out = redactor(text);
      lease.redactions += redactionsIn(text, out);
      return out;
    };
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        // The events of one upstream chunk go out together, redacted together.
        let out = '';
        for (const event of splitter.push(chunk)) {
          const pass = reader.read(event);
          shape.read(event);
          // Screen at doubling lengths (the whole text each time costs at most twice one full
          // screen), and always the whole text before the event that ends the stream goes out.
          const due = reader.text.length >= nextScreen || (reader.finished && reader.text.length > screenedAt);
          if (due) {
            screenedAt = reader.text.length;
            nextScreen = Math.max(SCREEN_FIRST_CHARS, 2 * screenedAt);
            if (await this.screen(lease, reader.text)) {
              if (out && !res.destroyed) res.write(redact(out));
              stop('halted', 'the answer was stopped by Warden’s screening (CRITICAL cascade); the stage is halted');
              return 'screened';
            }
          }
          if (pass) out += event.raw;
        }
        if (out && !res.destroyed) res.write(redact(out));
      }
    } catch {
      stop('upstream', 'the model’s stream was cut before its end');
      return 'cut';
    }
    if (reader.text.length > screenedAt && (await this.screen(lease, reader.text))) {
      stop('halted', 'the answer was stopped by Warden’s screening (CRITICAL cascade); the stage is halted');
      return 'screened';
    }
    if (!reader.finished) {
      stop('upstream', 'the model’s stream ended before its last event');
      return 'cut';
    }
    const rest = splitter.rest();
    if (rest && !res.destroyed) res.write(rest);
    res.end();
    return 'whole';
  }

  /** True when the text is a CRITICAL cascade: recorded, and the attempt halted. */
  private async screen(lease: Lease, text: string): Promise<boolean> {
    if (!text) return false;
    const verdict = detectCascade(text, lease.spec.screening);
    if (verdict.level !== 'CRITICAL') return false;
    const message = `the ${lease.spec.stage} answer is a CRITICAL cascade (score ${verdict.score}): the stream was ended and the stage halted`;
    await this.event(lease, 'CASCADE_DETECTED', 'critical', message, {
      key: 'gateway-cascade',
      suggestion: 'Read the answer in the lineage; narrow the intent or its prompt so the agent does not widen the task.',
      metadata: { level: verdict.level, score: verdict.score, patterns: verdict.matches.map((m) => `${m.category}: ${m.excerpt}`).slice(0, 10) },
    });
    this.haltLease(lease, 'halted', message, FailureType.SafetyHalt);
    return true;
  }

  private async settle(lease: Lease, open: OpenCall, report: CallReport): Promise<{ inputTokens: number; outputTokens: number; usd: string; modelId?: string }> {
    if (lease.spec.replayOf) return report.kind === 'paid' ? { inputTokens: report.usage.inputTokens, outputTokens: report.usage.outputTokens, usd: '0' } : { inputTokens: 0, outputTokens: 0, usd: '0' };
    const usd = await lease.spec.meter.close(open, report);
    if (report.kind !== 'paid') return { inputTokens: 0, outputTokens: 0, usd };
    this.limiter.owe(lease.spec.agentId, open.model, report.usage.inputTokens + report.usage.outputTokens);
    return { inputTokens: report.usage.inputTokens, outputTokens: report.usage.outputTokens, usd };
  }

  private get graceMs(): number {
    return this.options.haltGraceMs ?? 10_000;
  }

  private haltLease(lease: Lease, kind: RefusalKind, message: string, type: string): void {
    lease.haltWith({ kind, message, failure: ApplicationFailure.create({ type, message: `model gateway: ${message}`, nonRetryable: true }) }, this.graceMs);
  }

  /**
   * Step 7: one call judged with the attempt's earlier ones. Each finding is one ANOMALY_DETECTED
   * event (once per attempt and rule); a loop halts the attempt, an error loop stops it at once.
   */
  private async judge(lease: Lease, observation: CallObservation): Promise<void> {
    const { state, findings } = observeCall(lease.callPatterns, observation, this.patterns);
    lease.callPatterns = state;
    // Halted before the first await: the agent's next call, already on its way, is refused.
    const halting = findings.find((f) => f.halts);
    if (halting && !lease.halt) {
      this.haltLease(lease, 'halted', halting.reason, FailureType.SafetyHalt);
      if (halting.rule === 'error-loop') lease.stopNow();
    }
    for (const finding of findings) await this.report(lease, finding);
  }

  private async report(lease: Lease, finding: CallFinding): Promise<void> {
    await this.event(lease, 'ANOMALY_DETECTED', finding.severity, `${finding.reason} (${lease.spec.stage})`, {
      key: `call-pattern:${finding.rule}`,
      suggestion: finding.suggestion,
      metadata: { ...finding.metadata, rule: finding.rule, monitor: 'gateway', pattern: `call-${finding.rule}` },
    });
  }

  private async checkErrorLoop(lease: Lease): Promise<void> {
    const inRow = this.failuresInRow.get(lease) ?? 0;
    const limit = this.options.maxFailuresInRow ?? 8;
    if (inRow < limit || lease.halt) return;
    const message = `${inRow} calls in a row failed or were refused: the agent is in an error loop`;
    await this.event(lease, 'ANOMALY_DETECTED', 'high', `${message} (${lease.spec.stage})`, { key: 'error-loop', suggestion: 'Read the agent’s log in the lineage and the model_calls rows of the attempt.', metadata: { failuresInRow: inRow } });
    this.haltLease(lease, 'halted', message, FailureType.SafetyHalt);
    lease.stopNow();
  }

  private endpointOf(lease: Lease, model: string): string {
    return endpointKey({ kind: lease.spec.upstream.kind, baseUrl: lease.spec.upstream.baseUrl, model });
  }

  private async event(lease: Lease, type: SafetyEventType, severity: Severity, reason: string, details: Parameters<NonNullable<LeaseSpec['event']>>[3]): Promise<void> {
    const { spec } = lease;
    this.options.logger.warn({ intentId: spec.intentId, stage: spec.stage, attempt: spec.attempt, eventType: type }, `gateway: ${reason}`);
    await spec.event?.(type, severity, reason, details).catch((error: unknown) => this.options.logger.error({ err: error }, 'gateway: could not record a safety event'));
  }

  private async record(row: ModelCallInput): Promise<void> {
    if (!this.options.recordCall) return;
    await this.options.recordCall(row).catch((error: unknown) => this.options.logger.error({ err: error, call: row.id }, 'gateway: could not record a model call'));
  }
}

/** An upstream 5xx, thrown inside the circuit so it counts as the endpoint's failure. */
class UpstreamStatus extends Error {
  constructor(readonly response: Response) {
    super(`upstream HTTP ${response.status}`);
  }
}

/** A recorded answer as the upstream's response would have been: its status, its body or its events. */
function recordedResponse(replayed: ReplayedAnswer): Response {
  const { answer } = replayed;
  const streamed = answer.kind === 'events';
  // A call that ended before any status was written is given back as the gateway error it was.
  const status = replayed.status >= 200 && replayed.status <= 599 ? replayed.status : 502;
  return new Response(streamed ? answer.events.join('') : answer.text, { status, headers: { 'content-type': streamed ? 'text/event-stream' : 'application/json' } });
}

function keyOf(req: IncomingMessage): string | undefined {
  const auth = req.headers.authorization;
  if (typeof auth === 'string' && /^Bearer\s+/i.test(auth)) return auth.replace(/^Bearer\s+/i, '').trim();
  const apiKey = req.headers['x-api-key'];
  return typeof apiKey === 'string' && apiKey ? apiKey : undefined;
}


/** The provider headers a client sent that the upstream needs (API version and betas), with the real key. */
function upstreamHeaders(kind: 'anthropic' | 'openai', req: IncomingMessage, key: string | undefined): Record<string, string> {
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  for (const name of ['anthropic-version', 'anthropic-beta', 'openai-beta', 'accept']) {
    const value = req.headers[name];
    if (typeof value === 'string') headers[name] = value;
  }
  if (kind === 'anthropic') {
    headers['anthropic-version'] ??= '2023-06-01';
    if (key) headers['x-api-key'] = key;
  } else if (key) {
    headers.authorization = `Bearer ${key}`;
  }
  return headers;
}

function send(res: ServerResponse, family: 'openai' | 'anthropic', refusal: Refusal): void {
  if (res.headersSent) {
    res.destroy();
    return;
  }
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (refusal.retryAfterMs !== undefined) headers['retry-after'] = String(Math.max(1, Math.ceil(refusal.retryAfterMs / 1000)));
  res.writeHead(statusOf(refusal.kind), headers);
  res.end(errorBody(family, refusal.kind, refusal.message));
}

async function readBody(req: IncomingMessage, maxBytes: number): Promise<string> {
  const declared = Number(req.headers['content-length']);
  if (Number.isFinite(declared) && declared > maxBytes) {
    req.resume();
    throw new Refusal('too-large', `the request is ${declared} bytes; the gateway takes at most ${maxBytes}`);
  }
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req as AsyncIterable<Buffer>) {
    size += chunk.byteLength;
    if (size > maxBytes) {
      req.resume();
      throw new Refusal('too-large', `the request passed ${maxBytes} bytes; the gateway takes at most that`);
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString('utf8');
}

