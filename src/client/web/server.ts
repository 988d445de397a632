import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import os from 'node:os';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import type { Client } from '@temporalio/client';
import type { Logger } from 'pino';
import { DecisionLinkUses } from '../../ledger/decision-link-uses';
import { GateViewLinks } from '../../ledger/gate-view-links';
import type { LinkSecret } from '../../runtime/link-secret';
import { decideCommands } from '../../shared/decide-commands';
import type { Ledger } from '../../ledger/ledger';
import { deterministicUuid } from '../../ledger/event-id';
import { gatePagePath, LINK_PARAMETERS, readLinkToken, type LinkCheck, type LinkClaims } from '../../shared/decision-links';
import { changeReaderFor, type ChangeReader } from './change-reader';
import { DECISION_KINDS, MAX_CONDITIONS, MAX_DOCUMENT_LENGTH, MAX_REASON_LENGTH, type DecisionKind } from '../../shared/decisions';
import { MERGE_CHECK_GATES } from '../../shared/merge-conditions';
import { UserError } from '../../shared/errors';
import type { GateName } from '../../shared/gates';
import type { IntentState } from '../../shared/state';
import { readApproverKey } from '../approver-keys';
import { endedStatusOf, queryState, sendDecision } from '../intents';
import { readWebhookDelivery } from '../../forge/webhook';
import { intentsWithPullRequest } from '../../ledger/pull-request-lookup';
import { forgeEventSignal } from '../../shared/messages';
import { INTENT_BRANCH_PREFIX, workflowIdForIntent } from '../../shared/ids';
import { waitingGates } from '../list-intents';
import { esc, gatePage, inboxPage, messagePage, type DecidingAs, type GateShown, type ViewOnly } from './pages';

/** How long a gate's page waits for the review package to reach the pending gate, and how often it looks. */
const PACKAGE_WAIT_MS = 5_000;
const PACKAGE_POLL_MS = 50;

export interface WebAppOptions {
  readonly client: Client;
  readonly ledger: Ledger;
  /** The decision-link secret the workers share (see readLinkSecret), or why there is none: then no decision link is taken. */
  readonly linkSecret: LinkSecret;
  /** Who a decision made from the operator's own session is made as. */
  readonly operator: string;
  /** Where approvers' private keys are: a decision is signed with its approver's key when it is here. */
  readonly keysDir: string;
  readonly host: string;
  readonly port: number;
  readonly logger: Logger;
  /** Where changes pushed by other hosts (config `placement`) are fetched to be shown; default a folder in the temp dir. */
  readonly cacheDir?: string;
  /** The secret the forge signs its webhook deliveries with (`merge.forge.webhookSecretEnv`); without it `/forge/webhook` takes none. */
  readonly forgeWebhookSecret?: string;
}

export interface WebApp {
  /** Where it listens. */
  readonly url: string;
  /** The operator's own entry: opening it once sets the session cookie. */
  readonly operatorUrl: string;
  close(): Promise<void>;
}

const SESSION_COOKIE = 'warden_session';
const MAX_BODY = 512 * 1024;
const MAX_DOCUMENT = 100 * 1024;
const MAX_DIFF = 200 * 1024;
/** Refusals recorded in the ledger per minute: forged links cannot flood it. */
const REFUSALS_RECORDED_PER_MINUTE = 60;

class HttpError extends Error {
  constructor(
    readonly status: number,
    readonly title: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * `warden serve`: the inbox of waiting gates and a page per gate with its review package, where a
 * person decides. Two ways in: a notification's link (decides once, as the approver it was made
 * for, until it expires) or the operator's session (the link printed at start sets a cookie). A
 * view link (made where no decision link could be) shows a gate's page only, while it waits.
 * Every decision goes through `sendDecision`, signed with the approver's key when this machine
 * has it, and the workflow checks it like any other; every refused link is a ledger row.
 */
export async function startWebApp(o: WebAppOptions): Promise<WebApp> {
  const sessionKey = randomBytes(24).toString('hex');
  const uses = new DecisionLinkUses(o.ledger.pool);
  const views = new GateViewLinks(o.ledger.pool);
  const refusals = { minute: 0, count: 0 };
  // Without the link secret the forms' tokens hold for this process only: only the session decides then.
  const csrfKey = o.linkSecret.secret ?? randomBytes(32);
  const csrfOf = (grant: string) => createHmac('sha256', csrfKey).update(`csrf.${grant}`).digest('base64url');
  const readToken = (token: string): LinkCheck =>
    o.linkSecret.secret ? readLinkToken(o.linkSecret.secret, token) : { ok: false, reason: `this web app cannot check decision links: ${o.linkSecret.missing}` };
  const same = (a: string, b: string) => a.length === b.length && timingSafeEqual(Buffer.from(a), Buffer.from(b));

  function hasSession(req: http.IncomingMessage): boolean {
    const cookie = (req.headers.cookie ?? '').split(';').map((c) => c.trim().split('='));
    const value = cookie.find(([name]) => name === SESSION_COOKIE)?.[1];
    return value !== undefined && same(value, sessionKey);
  }

  async function refuseLink(reason: string, context: { intentId?: string; gate?: string; claims?: LinkClaims }): Promise<never> {
    await recordRefusal(reason, context);
    throw new HttpError(403, 'This link cannot decide', reason);
  }

  /** A refused link or decision as a ledger row, at most REFUSALS_RECORDED_PER_MINUTE a minute. */
  async function recordRefusal(reason: string, context: { intentId?: string; gate?: string; claims?: LinkClaims }, eventType: 'DECISION_LINK_REFUSED' | 'FORGE_WEBHOOK_REFUSED' = 'DECISION_LINK_REFUSED'): Promise<void> {
    const minute = Math.floor(Date.now() / 60_000);
    if (refusals.minute !== minute) Object.assign(refusals, { minute, count: 0 });
    if (++refusals.count <= REFUSALS_RECORDED_PER_MINUTE) {
      await o.ledger
        .audit.recordSafetyEvent({
          id: deterministicUuid(eventType, randomBytes(8).toString('hex')),
          timestamp: new Date(),
          eventType,
          severity: 'medium',
          reason,
          ...(context.intentId ? { intentId: context.intentId.slice(0, 64) } : {}),
          suggestion: eventType === 'FORGE_WEBHOOK_REFUSED' ? "check that the forge's webhook secret is the one this web app has (merge.forge.webhookSecretEnv)" : 'open the newest notification of the gate, or decide with warden approve / reject',
          metadata: { gate: context.gate?.slice(0, 40), approver: context.claims?.approver, expiresAt: context.claims?.expiresAt },
        })
        .catch((error: unknown) => o.logger.warn({ err: error }, 'could not record a refused decision link'));
    }
  }

  /** Who may decide here: the link's approver, or the operator with a session; undefined to only read. */
  async function grantOf(req: http.IncomingMessage, token: string | undefined, intentId: string, gate: string): Promise<{ as: DecidingAs; grant: string; claims?: LinkClaims } | undefined> {
    if (token) {
      const check = readToken(token);
      if (!check.ok) return refuseLink(check.reason, { intentId, gate, claims: check.claims });
      const { claims } = check;
      if (claims.intentId !== intentId || claims.gate !== gate) return refuseLink(`the link was made for the ${claims.gate} gate of ${claims.intentId}, not this page`, { intentId, gate, claims });
      return { as: { approver: claims.approver, via: 'link', signed: signs(claims.approver), expiresAt: claims.expiresAt, asOperator: claims.asOperator === true }, grant: token, claims };
    }
    if (hasSession(req)) return { as: { approver: o.operator, via: 'session', signed: signs(o.operator) }, grant: sessionKey };
    return undefined;
  }

  function signs(approver: string): boolean {
    try {
      return readApproverKey(o.keysDir, approver) !== undefined;
    } catch {
      return false;
    }
  }

  /** What `ask` says of the intent; an intent the server does not know is a 404. */
  async function ofIntent<T>(intentId: string, ask: (client: Client, intentId: string) => Promise<T>): Promise<T> {
    try {
      return await ask(o.client, intentId);
    } catch (error) {
      if ((error as Error).name === 'WorkflowNotFoundError') throw new HttpError(404, 'No such intent', `There is no intent ${intentId}.`);
      throw error;
    }
  }

  const endedOf = (intentId: string): Promise<string | undefined> => ofIntent(intentId, endedStatusOf);
  const stateOf = (intentId: string): Promise<IntentState> => ofIntent(intentId, queryState);

  /**
   * The intent's state for a gate's page. A gate after impl shows its review package, which the
   * workflow puts on the pending gate a moment after the package's activity has written the
   * gate's request (and the notification may already be out): wait for it, briefly.
   */
  async function gateStateOf(intentId: string, gate: string): Promise<IntentState> {
    const awaitsPackage = (s: IntentState) => s.pendingGate?.gate === gate && s.attempts.impl !== undefined && !s.pendingGate.package;
    let state = await stateOf(intentId);
    for (let waitedMs = 0; awaitsPackage(state) && waitedMs < PACKAGE_WAIT_MS; waitedMs += PACKAGE_POLL_MS) {
      await new Promise((resolve) => setTimeout(resolve, PACKAGE_POLL_MS));
      state = await stateOf(intentId);
    }
    return state;
  }

  /** What the gate page of an ended intent shows: the ledger's record of it, and how it ended (`status`). */
  async function endedIntentShown(intentId: string, status: string): Promise<GateShown> {
    const record = await o.ledger.queries.intentRecord(intentId);
    return { goal: record.started?.goal ?? '', status, spendUsd: record.spendUsd, decisions: record.decisions };
  }

  /**
   * What a view link shows: the gate it was made for, while the opening it was made for waits
   * (the link ends when the gate closes). A token this ledger never made is a refusal on record.
   */
  async function viewOf(token: string, intentId: string, gate: string, state: GateShown): Promise<ViewOnly> {
    const link = await views.find(token);
    if (!link) return refuseLink('the link is not a link Warden made (it may have been cut short when copied)', { intentId, gate });
    if (link.intentId !== intentId || link.gate !== gate) return refuseLink(`the link was made for the ${link.gate} gate of ${link.intentId}, not this page`, { intentId, gate });
    const pending = state.pendingGate;
    if (pending?.gate !== gate || pending.requestedAt !== link.gateOpenedAt) {
      throw new HttpError(410, 'This link has ended', `It showed the ${gate} gate of ${intentId} while it waited (from ${link.gateOpenedAt}); that gate is no longer waiting (the intent is ${state.status}).`);
    }
    return { why: link.why, commands: decideCommands(intentId, gate) };
  }

  async function showGate(req: http.IncomingMessage, res: http.ServerResponse, intentId: string, gate: string, token: string | undefined, viewToken: string | undefined): Promise<void> {
    const granted = await grantOf(req, token, intentId, gate);
    if (!granted && !hasSession(req) && viewToken === undefined) throw new HttpError(401, 'Sign in first', 'Open this page from the link in a notification, or from the address warden serve printed.');
    // An intent that has ended waits at no gate: its page is the ledger's record, with no replay of its history.
    const ended = await endedOf(intentId);
    const state = ended === undefined ? await gateStateOf(intentId, gate) : undefined;
    const shown = state ?? (await endedIntentShown(intentId, ended!));
    const viewOnly = !granted && !hasSession(req) && viewToken !== undefined ? await viewOf(viewToken, intentId, gate, shown) : undefined;
    if (granted?.claims && shown.pendingGate?.gate === gate && shown.pendingGate.requestedAt !== granted.claims.gateOpenedAt) {
      await refuseLink(`the link was made for an earlier opening of the ${gate} gate (${granted.claims.gateOpenedAt}); the gate opened again at ${shown.pendingGate.requestedAt}`, { intentId, gate, claims: granted.claims });
    }
    const used = granted?.claims ? await uses.usage(granted.claims.nonce) : undefined;
    const change = state ? await changeReaderFor(state, o.cacheDir ?? path.join(os.tmpdir(), 'warden-serve-changes')) : undefined;
    const page = gatePage({
      intentId,
      gate,
      state: shown,
      as: used ? undefined : granted?.as,
      viewOnly,
      hidden: granted ? { ...(token ? { [LINK_PARAMETERS.decide]: token } : {}), csrf: csrfOf(granted.grant) } : {},
      action: gatePagePath(intentId, gate),
      documents: state ? await documentsOf(state, change) : [],
      diff: state ? await diffOf(state, change) : undefined,
      editableText: state ? await editableTextOf(state, change) : undefined,
      mergeChecks: MERGE_CHECK_GATES.includes(gate),
    });
    send(res, 200, used ? page.replace('<h1>', `<p class="bad" role="status">This link decided already (${esc(used.decision)} at ${esc(used.usedAt)}).</p><h1>`) : page);
  }

  async function decide(req: http.IncomingMessage, res: http.ServerResponse, intentId: string, gate: string): Promise<void> {
    const form = new URLSearchParams(await bodyOf(req));
    const token = form.get(LINK_PARAMETERS.decide) ?? undefined;
    const granted = await grantOf(req, token, intentId, gate);
    if (!granted && form.has(LINK_PARAMETERS.view)) await refuseLink('a view link shows the gate only: it cannot decide', { intentId, gate });
    if (!granted) throw new HttpError(401, 'Sign in first', 'Deciding needs the link from a notification, or the operator session of warden serve.');
    if (!same(form.get('csrf') ?? '', csrfOf(granted.grant))) throw new HttpError(403, 'Refused', 'The form did not come from this page: open the gate again and decide there.');
    const decision = form.get('decision') as DecisionKind | null;
    if (!decision || !DECISION_KINDS.includes(decision) || decision === 'defer') throw new HttpError(400, 'Refused', 'Decide with approve, approve-with-conditions, request-changes, approve-with-edits or reject.');
    const reason = (form.get('reason') ?? '').trim().slice(0, MAX_REASON_LENGTH) || undefined;
    const conditions = (form.get('conditions') ?? '')
      .split('\n')
      .map((c) => c.trim())
      .filter(Boolean);
    const document = decision === 'approve-with-edits' ? (form.get('document') ?? '').replace(/\r\n/g, '\n') : undefined;
    if (document !== undefined && !document.trim()) throw new HttpError(400, 'Refused', 'Approving your edits needs the edited document.');
    if (document !== undefined && document.length > MAX_DOCUMENT_LENGTH) throw new HttpError(400, 'Refused', `The edited document is longer than ${MAX_DOCUMENT_LENGTH} characters.`);
    if (decision === 'request-changes' && !reason) throw new HttpError(400, 'Refused', 'Say which changes to make.');
    if (decision === 'reject' && !reason) throw new HttpError(400, 'Refused', 'A rejection needs a reason.');
    if (decision === 'approve-with-conditions' && conditions.length === 0) throw new HttpError(400, 'Refused', 'Approving with conditions needs at least one condition.');
    if (conditions.length > MAX_CONDITIONS) throw new HttpError(400, 'Refused', `At most ${MAX_CONDITIONS} conditions.`);
    // An intent that has ended waits at no gate: the server says how it ended, with no replay of its history.
    const ended = await endedOf(intentId);
    const state = ended === undefined ? await stateOf(intentId) : undefined;
    const back = gatePagePath(intentId, gate, token);
    if (state === undefined || state.pendingGate?.gate !== gate) {
      const status = ended ?? state!.status;
      if (granted.claims) await recordRefusal(`a decision from a link for the ${gate} gate, which is not waiting (the intent is ${status}): nothing was decided`, { intentId, gate, claims: granted.claims });
      return send(res, 409, messagePage('Not waiting', `The ${gate} gate of ${intentId} is not waiting for a decision (the intent is ${status}${state?.pendingGate ? `, at the ${state.pendingGate.gate} gate` : ''}). Nothing was decided.`, false, back));
    }
    if (granted.claims) {
      if (state.pendingGate.requestedAt !== granted.claims.gateOpenedAt) {
        await refuseLink(`the link was made for an earlier opening of the ${gate} gate (${granted.claims.gateOpenedAt})`, { intentId, gate, claims: granted.claims });
      }
      const first = await uses.claim({ nonce: granted.claims.nonce, intentId, gate, approver: granted.claims.approver, decision });
      if (!first) await refuseLink('this link decided already: each link decides once', { intentId, gate, claims: granted.claims });
    }
    try {
      await sendDecision(o.client, intentId, { gate: gate as GateName, decision, by: granted.as.approver, reason, ...(conditions.length ? { conditions } : {}), ...(document !== undefined ? { document } : {}) }, { keysDir: o.keysDir });
    } catch (error) {
      if (error instanceof UserError) return send(res, 409, messagePage('Refused', error.message, false, back));
      throw error;
    }
    const what = { reject: 'rejected', approve: 'approved', 'approve-with-conditions': `approved with ${conditions.length} condition(s)`, 'request-changes': 'sent back with changes requested', 'approve-with-edits': 'approved with your edits' }[decision];
    send(res, 200, messagePage('Decided', `The ${gate} gate of ${intentId} is ${what} by ${granted.as.approver}.`, true, back));
  }

  /**
   * A webhook delivery from the team's forge: checked by its signature (or GitLab's token), then
   * every intent whose pull request it is about is woken to read it (signal forgeEvent). The
   * delivery decides nothing itself: the workflow reads the reviews from the forge's API.
   */
  async function forgeWebhook(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const secret = o.forgeWebhookSecret;
    if (!secret) throw new HttpError(404, 'Not found', 'This web app takes no forge webhooks: set the secret named by merge.forge.webhookSecretEnv where it runs.');
    const body = await rawBodyOf(req);
    const reading = readWebhookDelivery({ headers: req.headers, body }, secret);
    if (!reading.accepted) {
      await recordRefusal(`a forge webhook delivery was refused: ${reading.reason}`, {}, 'FORGE_WEBHOOK_REFUSED');
      return send(res, 401, `refused: ${reading.reason}`, 'text/plain');
    }
    const intents = new Set<string>();
    if (reading.headBranch?.startsWith(INTENT_BRANCH_PREFIX)) intents.add(reading.headBranch.slice(INTENT_BRANCH_PREFIX.length));
    for (const id of await intentsWithPullRequest(o.ledger.pool, { ...(reading.pullRequest !== undefined ? { number: reading.pullRequest } : {}), ...(reading.headSha ? { headSha: reading.headSha } : {}) })) intents.add(id);
    let woken = 0;
    for (const id of intents) {
      // An intent that has ended, or a branch that only looks like one of ours, has nothing to wake.
      const sent = await o.client.workflow
        .getHandle(workflowIdForIntent(id))
        .signal(forgeEventSignal, { event: reading.event, ...(reading.action ? { action: reading.action } : {}) })
        .then(
          () => true,
          () => false,
        );
      if (sent) woken += 1;
    }
    send(res, 202, `woke ${woken} intent(s)`, 'text/plain');
  }

  async function inbox(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    if (!hasSession(req)) throw new HttpError(401, 'Sign in first', 'Open the address warden serve printed (it carries the key of this session).');
    const gates = await waitingGates(o.client);
    send(res, 200, inboxPage(gates.map((g) => ({ ...g, page: gatePagePath(g.intentId, g.gate) }))));
  }

  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const parts = url.pathname.split('/').filter(Boolean).map(decodeURIComponent);
    const handle = async () => {
      if (url.pathname === '/' && req.method === 'GET') {
        const key = url.searchParams.get('key');
        if (key !== null) {
          if (!same(key, sessionKey)) throw new HttpError(403, 'Wrong key', 'This is not the key warden serve printed (it changes at every start).');
          res.setHeader('set-cookie', `${SESSION_COOKIE}=${sessionKey}; HttpOnly; SameSite=Strict; Path=/`);
          return redirect(res, '/');
        }
        return inbox(req, res);
      }
      if (parts.length === 3 && parts[0] === 'gates') {
        if (req.method === 'GET') return showGate(req, res, parts[1]!, parts[2]!, url.searchParams.get(LINK_PARAMETERS.decide) ?? undefined, url.searchParams.get(LINK_PARAMETERS.view) ?? undefined);
        if (req.method === 'POST') return decide(req, res, parts[1]!, parts[2]!);
      }
      if (url.pathname === '/forge/webhook' && req.method === 'POST') return forgeWebhook(req, res);
      if (url.pathname === '/healthz') return send(res, 200, 'ok', 'text/plain');
      throw new HttpError(404, 'Not found', 'There is no such page.');
    };
    handle().catch((error: unknown) => {
      if (error instanceof HttpError) return send(res, error.status, messagePage(error.title, error.message, false));
      o.logger.error({ err: error }, 'web app request failed');
      send(res, 500, messagePage('Something failed', error instanceof Error ? error.message : String(error), false));
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host, resolve);
  });
  const { port } = server.address() as AddressInfo;
  const base = `http://${o.host.includes(':') ? `[${o.host}]` : o.host}:${port}`;
  return {
    url: base,
    operatorUrl: `${base}/?key=${sessionKey}`,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

function send(res: http.ServerResponse, status: number, body: string, type = 'text/html; charset=utf-8'): void {
  if (res.headersSent) return void res.end();
  res.writeHead(status, {
    'content-type': type,
    'cache-control': 'no-store',
    // No script, no frames, no outside resources: the page shows agent-written text.
    'content-security-policy': "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; frame-ancestors 'none'",
    'referrer-policy': 'no-referrer',
    'x-content-type-options': 'nosniff',
  });
  res.end(body);
}

function redirect(res: http.ServerResponse, to: string): void {
  res.writeHead(303, { location: to });
  res.end();
}

async function bodyOf(req: http.IncomingMessage): Promise<string> {
  return (await rawBodyOf(req)).toString('utf8');
}

/** The body's bytes as sent: a webhook's signature is over them. */
async function rawBodyOf(req: http.IncomingMessage): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of req) {
    size += (chunk as Buffer).length;
    if (size > MAX_BODY) throw new HttpError(413, 'Too large', 'The form is larger than a decision can be.');
    chunks.push(chunk as Buffer);
  }
  return Buffer.concat(chunks);
}

/** The intent's latest LLD and spec, from wherever its change can be read. */
async function documentsOf(state: IntentState, change: ChangeReader | undefined): Promise<Array<{ name: string; text: string }>> {
  if (!change) return [];
  const latest = new Map<string, { name: string; attempt: number; relative: string }>();
  for (const [name, relative] of Object.entries(state.artifacts)) {
    const match = /^\d\d-(lld|spec)(?:-attempt-(\d+))?\.md$/.exec(name);
    if (!match) continue;
    const attempt = Number(match[2] ?? 1);
    if ((latest.get(match[1]!)?.attempt ?? 0) < attempt) latest.set(match[1]!, { name, attempt, relative });
  }
  const documents = [];
  for (const { name, relative } of [...latest.values()].sort((a, b) => a.name.localeCompare(b.name))) {
    const text = await change.read(relative);
    if (text !== undefined) documents.push({ name, text: text.length > MAX_DOCUMENT ? `${text.slice(0, MAX_DOCUMENT)}\n… (cut at ${MAX_DOCUMENT / 1024} KB)` : text });
  }
  return documents;
}

/** The document an edit would replace. */
async function editableTextOf(state: IntentState, change: ChangeReader | undefined): Promise<string | undefined> {
  const relative = state.pendingGate?.editable;
  return relative && change ? change.read(relative) : undefined;
}

/** The change against its base, when the review package names the base. */
async function diffOf(state: IntentState, change: ChangeReader | undefined): Promise<string | undefined> {
  const base = state.pendingGate?.package?.baseBranch;
  if (!base || !change) return undefined;
  const diff = await change.diff(base);
  return diff !== undefined && diff.length > MAX_DIFF ? `${diff.slice(0, MAX_DIFF)}\n… (cut at ${MAX_DIFF / 1024} KB)` : diff;
}
