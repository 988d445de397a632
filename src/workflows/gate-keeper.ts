import { condition, log, setCurrentDetails, setHandler } from '@temporalio/workflow';
import { parseDecision, type Decision, type DecisionAnswer, type RecordedDecision } from '../shared/decisions';
import { verifyDecisionProof } from '../shared/decision-proof';
import { parseDuration } from '../shared/duration';
import { GATES, isGateKind, type GateDefinition, type GateName } from '../shared/gates';
import type { CustomGate } from '../shared/custom-gates';
import type { GateSettings } from '../shared/gate-settings';
import { MERGE_CHECK_GATES, MERGE_CONDITION_FORMS, parseMergeCondition } from '../shared/merge-conditions';
import type { Intent } from '../shared/intent';
import { autoPassRefusal, ladderDecider, type LadderLevel } from '../shared/ladder';
import { decideSignal, decideUpdate } from '../shared/messages';
import { renderDocumentFacts, renderReviewPackage, type ReviewPackage } from '../shared/review-package';
import type { RiskClass } from '../shared/risk';
import type { IntentState, PendingGate } from '../shared/state';
import type { LedgerBatch } from '../activities';
import type { LedgerRecorder } from './ledger-recorder';

/** What a gate may be answered with beyond approve, reject and defer. */
export interface GateAllows {
  /** request-changes: the caller runs the stage again with the comments. */
  readonly changes?: boolean;
  /** approve-with-edits: the document (worktree path) the person's version replaces. */
  readonly editable?: string;
  /** What a design gate shows beside its document (see PendingGate.document). */
  readonly document?: PendingGate['document'];
}

/** What the automation ladder needs to know when a gate opens. */
export interface AutoPassContext {
  readonly level: LadderLevel;
  readonly risk: RiskClass;
  /** Checks that do not vouch for the agent right now (confidence gate, review BLOCK, judge rule…). */
  readonly refusals: readonly string[];
}

export interface GateKeeperOptions {
  readonly intent: Intent;
  readonly state: IntentState;
  readonly ledger: LedgerRecorder;
  /** The agent's identities: a decision `by` one of them is the agent approving itself. */
  readonly agentNames: readonly string[];
  /** Agent-written code may run unconfined or with the host's network here: then only signed decisions count, at every gate. */
  readonly signedOnly: boolean;
  readonly autoPass: (gate: GateName) => AutoPassContext;
  /**
   * Writes the rows that open a gate, and returns the review package once impl has run (undefined
   * before): the package's activity writes them once it has built the package, an ordinary
   * ledger write does when there is none.
   */
  readonly openGate: (request: LedgerBatch) => Promise<ReviewPackage | undefined>;
  /** Status updates (search attributes) when a gate opens and closes. */
  readonly onWaiting: (gate: GateName) => void;
  /** After every decision, automatic or not (e.g. to carry conditions into the next prompt). */
  readonly onDecided: (decision: RecordedDecision) => void;
}

/**
 * The human gates of one intent: receives decisions (signal `decide`, update `decision`),
 * checks who may decide, lets the automation ladder pass what its level allows, waits with a
 * timer, escalates and applies the timeout policy, and writes every step to the ledger.
 */
/** How far a signature's time may be from the workflow's: clocks differ, and a person takes time to send. */
const SIGNATURE_MAX_AGE_MS = 15 * 60_000;
/**
 * Refused decisions recorded one by one; past this many, the update's validator turns further
 * ones away unrecorded, so nobody can fill the history with refusals.
 */
export const MAX_RECORDED_REFUSALS = 200;
/** JSON of anything a message carried; never throws. */
function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value ?? null) ?? 'null';
  } catch {
    return String(value);
  }
}

/** The longest a gate's timeout is announced ahead. */
const TIMEOUT_WARNING_MAX_LEAD_MS = 60 * 60_000;

/**
 * What GATE_REQUESTED carries for a notification: risk, spend, tests; the review package's
 * activity adds the predicted against the actual size (packageFacts) when it writes the row.
 */
function gateSummary(state: IntentState): Record<string, unknown> {
  const tests = state.tests.at(-1);
  return {
    ...(state.risk ? { risk: state.risk.class } : {}),
    spendUsd: state.spendUsd,
    ...(tests ? { tests: { passed: tests.passed, summary: tests.summary } } : {}),
  };
}

/** How a person's decision is shown after its name: signed or not, or where on the forge. Nothing for the ladder's and a timeout's. */
function signedWord(signed: boolean | undefined, via?: string): string {
  if (via) return ` (${via})`;
  return signed === undefined ? '' : signed ? ' (signed)' : ' (unsigned)';
}

/** Refused decisions the state keeps for `warden status` and the Web UI. */
const SHOWN_REFUSALS = 5;

export class GateKeeper {
  private decision: RecordedDecision | undefined;
  private readonly deferred = new Set<GateName>();
  /** Nonces of every signature checked so far: each signature decides (or is refused) once. */
  private readonly nonces = new Set<string>();
  private deadline = 0;
  /** The deadline GATE_TIMEOUT_NEAR was last written for. */
  private warnedFor = 0;

  constructor(private readonly o: GateKeeperOptions) {
    setHandler(decideSignal, (raw: unknown) => {
      const parsed = parseDecision(raw);
      if (!parsed.ok) return this.refuse(`invalid decide payload: ${parsed.problems}`, raw);
      const refusal = this.mayDecide(parsed.decision);
      this.spend(parsed.decision);
      if (refusal) return this.refuse(refusal, raw);
      this.accept(parsed.decision);
    });
    setHandler(
      decideUpdate,
      (raw: unknown): DecisionAnswer => {
        const parsed = parseDecision(raw);
        if (!parsed.ok) throw new Error(`invalid decision: ${parsed.problems}`); // the validator lets none through
        const { decision } = parsed;
        const refusal = this.mayDecide(decision);
        this.spend(decision);
        if (refusal) {
          this.refuse(refusal, raw);
          return { accepted: false, reason: refusal };
        }
        this.accept(decision);
        return { accepted: true };
      },
      {
        validator: (raw: unknown): void => {
          const parsed = parseDecision(raw);
          if (!parsed.ok) throw new Error(`invalid decision: ${parsed.problems}`);
          // Past the cap, a decision that would be refused is turned away here, unrecorded; one that counts still gets through.
          if (this.o.state.rejectedSignals >= MAX_RECORDED_REFUSALS) {
            const refusal = this.mayDecide(parsed.decision);
            if (refusal) throw new Error(`refused: ${refusal} (after ${MAX_RECORDED_REFUSALS} refused decisions, refusals are no longer recorded one by one)`);
          }
        },
      },
    );
  }

  /** Settings of `gate`, as configured: a built-in gate's (config file, then intent), or a custom gate's own. */
  settings(gate: GateName): GateSettings {
    if (isGateKind(gate)) return this.o.intent.gates[gate] ?? {};
    const custom = this.custom(gate);
    return custom ? { approvers: custom.approvers ? [...custom.approvers] : undefined, timeout: custom.timeout, onTimeout: custom.onTimeout, deferPeriod: custom.deferPeriod, escalateTo: custom.escalateTo } : {};
  }

  /** What every gate has: a built-in gate's definition, or a custom gate's (a person decides unless `ladder`). */
  private traits(gate: GateName): GateDefinition {
    if (isGateKind(gate)) return GATES[gate];
    const custom = this.custom(gate);
    return { question: custom?.prompt ?? gate, escalateTo: custom?.escalateTo ?? 'the intent owner', humanOnly: custom?.ladder !== true, optional: false };
  }

  private custom(gate: GateName): CustomGate | undefined {
    return this.o.intent.customGates.find((g) => g.id === gate);
  }

  /** Whether an optional gate is switched on (the mandatory ones always are). */
  enabled(gate: GateName): boolean {
    const { enabled, minRisk } = this.settings(gate);
    const traits = this.traits(gate);
    if (!traits.optional) return true;
    if (traits.offByDefault) return enabled ?? minRisk !== undefined;
    return enabled !== false;
  }

  /** Why the ladder does not pass `gate` now, or undefined when it does. A custom gate passes as merge does, if it lets the ladder at all. */
  private autoPassRefusal(gate: GateName): string | undefined {
    const auto = this.o.autoPass(gate);
    if (isGateKind(gate)) return autoPassRefusal({ level: auto.level, gate, risk: auto.risk, refusals: auto.refusals });
    if (this.traits(gate).humanOnly) return `the ${gate} gate always needs a person (a custom gate without ladder: true)`;
    return autoPassRefusal({ level: auto.level, gate: 'merge', risk: auto.risk, refusals: auto.refusals })?.replace('the merge gate', `the ${gate} gate`);
  }

  /** Whether an unsigned decision may count at `gate`: a custom gate takes them where the merge gate does. */
  private unsignedTaken(gate: GateName): boolean {
    return this.o.intent.approvals.unsignedGates.includes(isGateKind(gate) ? gate : 'merge');
  }

  /**
   * Asks for a decision on `gate`. The ladder may pass it at once (GATE_AUTO_PASSED); otherwise
   * it waits for an accepted decision or the gate's timeout, which escalates and then applies the
   * timeout policy (reject, or wait once more). Refused decisions are recorded as they come.
   */
  async decide(gate: GateName, prompt: string, allows: GateAllows = {}): Promise<RecordedDecision> {
    const { state, ledger, intent } = this.o;
    const refusal = this.autoPassRefusal(gate);
    if (refusal === undefined) return this.autoPassed(gate, prompt, this.o.autoPass(gate).level);

    // What led here is on record before the gate shows as open.
    await ledger.flushIfDue();
    const timeout = this.settings(gate).timeout ?? intent.limits.gateTimeout;
    const requestedAt = new Date();
    // Set with the pending gate, before any await: a defer may arrive during the writes below.
    this.deadline = requestedAt.getTime() + parseDuration(timeout);
    state.pendingGate = {
      gate,
      requestedAt: requestedAt.toISOString(),
      timeoutAt: new Date(this.deadline).toISOString(),
      prompt,
      humanOnly: this.traits(gate).humanOnly,
      whyNotAutomatic: refusal,
      ...(allows.changes ? { changes: true } : {}),
      ...(allows.editable ? { editable: allows.editable } : {}),
      ...(allows.document ? { document: allows.document } : {}),
    };
    this.o.onWaiting(gate);
    this.showDetails();
    // Written with what a person deciding from a notification needs first: risk, spend, tests, size.
    ledger.event('GATE_REQUESTED', 'info', prompt, {
      stage: state.stage,
      costSnapshot: { intentUsd: state.spendUsd },
      metadata: { gate, requestedAt: state.pendingGate.requestedAt, timeoutAt: state.pendingGate.timeoutAt, humanOnly: this.traits(gate).humanOnly, notAutomatic: refusal, ...gateSummary(state) },
    });
    // Signals drive the ledger writes from here until the gate closes, so this one is an ordinary
    // activity (the package's, or a ledger write) rather than a local one.
    const reviewPackage = await ledger.flushThrough((request) => this.o.openGate(request));
    // Shown once the request is on record: a person who finds the package finds GATE_REQUESTED in the ledger.
    if (reviewPackage && state.pendingGate) {
      state.pendingGate = { ...state.pendingGate, package: reviewPackage };
      this.showDetails();
    }

    const policy = this.settings(gate).onTimeout ?? 'reject';
    let decided = await this.waitUntilDeadline(gate, timeout);
    if (!decided && policy === 'wait-again') {
      this.escalate(gate, timeout, 'wait once more');
      this.deadline = Date.now() + parseDuration(timeout);
      state.pendingGate = { ...state.pendingGate, timeoutAt: new Date(this.deadline).toISOString() };
      this.showDetails();
      decided = await this.waitUntilDeadline(gate, timeout);
    }
    let decision: RecordedDecision;
    if (decided) {
      decision = this.decision!;
    } else {
      decision = { gate, decision: 'reject', by: 'warden', reason: `no decision within ${timeout}`, at: new Date().toISOString(), timedOut: true };
      this.escalate(gate, timeout, 'reject');
    }
    return this.close(decision, state.pendingGate.requestedAt);
  }

  /**
   * Waits for the decision or the deadline (a defer moves it). Once per deadline, when a fifth of
   * the wait (at most an hour) is left, GATE_TIMEOUT_NEAR tells whoever is notified.
   */
  private async waitUntilDeadline(gate: GateName, timeout: string): Promise<boolean> {
    const { ledger, state } = this.o;
    const lead = Math.min(parseDuration(timeout) / 5, TIMEOUT_WARNING_MAX_LEAD_MS);
    for (;;) {
      const now = Date.now();
      const remaining = this.deadline - now;
      if (remaining <= 0) return false;
      if (this.warnedFor !== this.deadline && remaining <= lead) {
        this.warnedFor = this.deadline;
        ledger.event('GATE_TIMEOUT_NEAR', 'medium', `the ${gate} gate times out at ${state.pendingGate?.timeoutAt} (then: ${this.settings(gate).onTimeout ?? 'reject'})`, {
          stage: state.stage,
          metadata: { gate, timeoutAt: state.pendingGate?.timeoutAt, requestedAt: state.pendingGate?.requestedAt },
          suggestion: `decide the ${gate} gate now, or defer it once`,
        });
      }
      const wakeIn = this.warnedFor === this.deadline ? remaining : remaining - lead;
      // Wake for the decision, the warning or the deadline, or refused signals to record.
      const woke = await condition(() => this.decision !== undefined || ledger.pending, wakeIn);
      await ledger.flush('task-queue');
      if (woke && this.decision !== undefined) return true;
    }
  }

  private escalate(gate: GateName, timeout: string, policy: 'reject' | 'wait once more'): void {
    const escalateTo = this.settings(gate).escalateTo ?? this.traits(gate).escalateTo;
    this.o.ledger.event('GATE_ESCALATED', 'high', `no decision at the ${gate} gate within ${timeout}; escalated to ${escalateTo}; timeout policy: ${policy}`, {
      stage: this.o.state.stage,
      metadata: { gate, escalateTo, policy, requestedAt: this.o.state.pendingGate?.requestedAt, timeoutAt: this.o.state.pendingGate?.timeoutAt },
      suggestion: `decide sooner, or set gates.${gate}.timeout / onTimeout in the config`,
    });
  }

  private async autoPassed(gate: GateName, prompt: string, level: LadderLevel): Promise<RecordedDecision> {
    const at = new Date().toISOString();
    const decision: RecordedDecision = { gate, decision: 'approve', by: ladderDecider(level), reason: `auto-passed at L${level}: ${prompt}`, at, timedOut: false };
    this.o.ledger.event('GATE_AUTO_PASSED', 'info', `${gate} gate passed by the automation ladder at L${level} (LOW risk, every check held)`, {
      stage: this.o.state.stage,
      metadata: { gate, level },
    });
    return this.close(decision, at);
  }

  private async close(decision: RecordedDecision, requestedAt: string): Promise<RecordedDecision> {
    const { ledger, state } = this.o;
    const person = decision.signed !== undefined;
    ledger.gateDecision({
      gate: decision.gate,
      decision: decision.decision,
      by: decision.by,
      reason: decision.reason,
      conditions: decision.conditions,
      requestedAt,
      decidedAt: decision.at,
      timedOut: decision.timedOut,
      ...(person ? { signed: decision.signed } : {}),
    });
    ledger.event('GATE_DECIDED', 'info', `${decision.gate} gate: ${decision.decision} by ${decision.by}${signedWord(decision.signed, decision.via)}${decision.reason ? ` (${decision.reason})` : ''}`, {
      stage: state.stage,
      metadata: { gate: decision.gate, decision: decision.decision, by: decision.by, timedOut: decision.timedOut, signed: decision.signed === true, ...(decision.via ? { via: decision.via } : {}) },
    });
    // On record before anything acts on it: the next activity carries it and its worker writes it
    // first, or a ledger write does before the next gate or a held call (see due-rows.ts).
    ledger.writeBeforeWaiting();
    state.decisions.push(decision);
    state.pendingGate = undefined;
    this.decision = undefined;
    this.o.onDecided(decision);
    return decision;
  }

  /**
   * A decision read from the team's forge: a review or comment by a reviewer the config maps to
   * an approver. The forge authenticated its author, so no signature is asked; everything else a
   * decision must pass still holds. Returns why it was refused, or undefined when it counted.
   */
  offerFromForge(decision: Decision, via: string): string | undefined {
    const refusal = this.mayDecide(decision, { proven: true });
    if (refusal) {
      this.refuse(`${refusal} (${via})`, decision);
      return refusal;
    }
    this.decision = { ...decision, at: new Date().toISOString(), timedOut: false, signed: false, via };
    return undefined;
  }

  /** The pending gate ends with `decision` whoever sent nothing: the pull request was closed on the forge. */
  endFromForge(reason: string, via: string): void {
    const pending = this.o.state.pendingGate;
    if (!pending || this.decision) return;
    this.decision = { gate: pending.gate, decision: 'reject', by: 'forge', reason, at: new Date().toISOString(), timedOut: false, via };
  }

  /** Why a parsed decision may not decide now, or undefined when it may. `proven`: its author is known some other way (the forge). */
  private mayDecide(decision: Decision, { proven = false } = {}): string | undefined {
    const pending = this.o.state.pendingGate;
    if (pending?.gate !== decision.gate || this.decision) return `decision for the ${decision.gate} gate, which is not pending`;
    // The agent never approves its own work: not under its own name, not from its own process.
    if (decision.agentSession !== undefined) return `sent from inside an agent's process (${decision.agentSession}): an agent may not decide its own gate`;
    const by = decision.by.toLowerCase();
    if (by === 'agent' || this.o.agentNames.some((name) => name.toLowerCase() === by)) return `${decision.by} is the agent: it may not decide its own gate`;
    const approvers = this.settings(decision.gate).approvers;
    if (approvers && !approvers.includes(decision.by)) return `${decision.by} may not decide the ${decision.gate} gate (approvers: ${approvers.join(', ')})`;
    const unproven = proven ? undefined : this.proofRefusal(decision, pending.requestedAt);
    if (unproven) return unproven;
    if (decision.decision === 'defer' && this.deferred.has(decision.gate)) return `the ${decision.gate} gate was deferred once already`;
    if (MERGE_CHECK_GATES.includes(decision.gate)) {
      const unchecked = (decision.conditions ?? []).filter((c) => parseMergeCondition(c) === undefined);
      if (unchecked.length > 0) {
        return `a condition at the ${decision.gate} gate is a check run before the merge (${MERGE_CONDITION_FORMS}); "${unchecked[0]!.slice(0, 100)}" is none of them: ask for it with request-changes instead`;
      }
    }
    if (decision.decision === 'request-changes' && !pending.changes) return `the ${decision.gate} gate cannot send its stage back: approve, reject or defer it`;
    if (decision.decision === 'approve-with-edits' && !pending.editable) return `the ${decision.gate} gate has no document to edit: only the lld and spec gates take approve-with-edits`;
    return undefined;
  }

  /** A signature is checked once: after it, its nonce is spent, whether it counted or not. */
  private spend(decision: Decision): void {
    if (decision.proof) this.nonces.add(decision.proof.nonce);
  }

  /**
   * Why the decision's proof does not hold, or undefined. A signature must be the named
   * approver's, over this intent, gate, decision and this opening of the gate, recent, and new.
   * Without one, the gate must be one where unsigned decisions are trusted.
   */
  private proofRefusal(decision: Decision, gateOpenedAt: string): string | undefined {
    const { intent } = this.o;
    const { proof } = decision;
    if (!proof) {
      if (this.o.signedOnly) {
        return `unsigned decision refused: agent-written code of this intent may run unconfined or with the worker's network, so only signed decisions count (warden approver init ${decision.by})`;
      }
      if (!this.unsignedTaken(decision.gate)) {
        return `unsigned decision refused: the ${decision.gate} gate takes only signed decisions (warden approver init ${decision.by}, then list its key under approvers in the config)`;
      }
      // A name with a key is that key's, whatever the server and the config: without its signature anyone could use the name.
      if (Object.hasOwn(intent.approvals.keys, decision.by)) {
        return `unsigned decision refused: ${decision.by} has a key in this intent's approvers, so a decision in that name counts only when signed with it (warden approve ${intent.id} --by ${decision.by} on the machine with that key, or the web app's link)`;
      }
      return undefined;
    }
    const key = intent.approvals.keys[decision.by];
    if (!key) return `signed as ${decision.by}, who has no public key in this intent's approvers`;
    if (this.nonces.has(proof.nonce)) return 'this signature was used before: each signed decision counts once';
    if (proof.gateOpenedAt !== gateOpenedAt) return `signed for an earlier opening of the ${decision.gate} gate (${proof.gateOpenedAt}), not this one (${gateOpenedAt})`;
    const age = Math.abs(Date.now() - Date.parse(proof.signedAt));
    if (!(age <= SIGNATURE_MAX_AGE_MS)) return `signed at ${proof.signedAt}, more than ${SIGNATURE_MAX_AGE_MS / 60_000} minutes from now: sign again`;
    const fields = { intentId: intent.id, gate: decision.gate, decision: decision.decision, by: decision.by, reason: decision.reason, conditions: decision.conditions, document: decision.document };
    if (!verifyDecisionProof(key, fields, proof)) return `the signature is not ${decision.by}'s signature of this decision`;
    return undefined;
  }

  /** Applies an accepted decision: defer extends the wait once; any other decides the gate. */
  private accept(decision: Decision): void {
    const { state, ledger, intent } = this.o;
    const at = new Date().toISOString();
    // The proof did its work; the record keeps only whether there was one.
    const { proof, ...decided } = decision;
    if (decision.decision !== 'defer') {
      this.decision = { ...decided, at, timedOut: false, signed: proof !== undefined };
      return;
    }
    this.deferred.add(decision.gate);
    const period = this.settings(decision.gate).deferPeriod ?? this.settings(decision.gate).timeout ?? intent.limits.gateTimeout;
    this.deadline += parseDuration(period);
    state.pendingGate = { ...state.pendingGate!, timeoutAt: new Date(this.deadline).toISOString() };
    state.decisions.push({ ...decided, at, timedOut: false, signed: proof !== undefined });
    ledger.gateDecision({ gate: decision.gate, decision: 'defer', by: decision.by, reason: decision.reason, requestedAt: state.pendingGate.requestedAt, decidedAt: at, timedOut: false, signed: proof !== undefined });
    ledger.event('GATE_DECIDED', 'info', `${decision.gate} gate deferred by ${decision.by}${signedWord(proof !== undefined)} until ${state.pendingGate.timeoutAt}`, {
      stage: state.stage,
      metadata: { gate: decision.gate, decision: 'defer', by: decision.by, signed: proof !== undefined },
    });
    this.showDetails();
  }

  private refuse(reason: string, payload: unknown): void {
    const { state } = this.o;
    state.rejectedSignals += 1;
    // Signals cannot be turned away before history; past the cap they are counted, not recorded one by one.
    if (state.rejectedSignals > MAX_RECORDED_REFUSALS) return;
    log.warn('refused a decision', { reason });
    const claimed = typeof payload === 'object' && payload !== null ? (payload as Record<string, unknown>) : {};
    const text = (value: unknown) => (typeof value === 'string' ? value.slice(0, 100) : undefined);
    const refused = { at: new Date().toISOString(), gate: text(claimed.gate), by: text(claimed.by), reason };
    state.refusedDecisions = [...(state.refusedDecisions ?? []), refused].slice(-SHOWN_REFUSALS);
    const last = state.rejectedSignals === MAX_RECORDED_REFUSALS ? ` (refusal ${MAX_RECORDED_REFUSALS}: further ones are counted in the state, not recorded one by one)` : '';
    this.o.ledger.event('DECISION_REFUSED', 'medium', `${reason}${last}`, {
      stage: state.stage,
      metadata: { payload: safeJson(payload).slice(0, 500) },
      suggestion: 'warden approve / reject ID as an approver of the gate (with a key where signatures are needed: warden approver init NAME)',
    });
    this.showDetails();
  }

  /** The Web UI's current details: what is asked, the package, and the payloads that answer. */
  private showDetails(): void {
    const { state, intent } = this.o;
    const pending = state.pendingGate;
    if (!pending) return;
    const gate = pending.gate;
    setCurrentDetails(
      [
        `**${intent.goal}**`,
        `Waiting at the **${gate}** gate: ${pending.prompt}`,
        `Tests: ${state.tests.at(-1)?.summary ?? 'not run'}. Spend: $${state.spendUsd}. Times out at ${pending.timeoutAt} (then: ${this.settings(gate).onTimeout ?? 'reject'}).`,
        pending.humanOnly ? 'This gate always needs a person.' : `Not automatic: ${pending.whyNotAutomatic}.`,
        this.o.signedOnly || !this.unsignedTaken(gate)
          ? `This gate takes only signed decisions: \`warden approve ${intent.id}\` (or reject) as an approver with a key (warden approver init NAME). A signal sent from here is refused.`
          : Object.keys(intent.approvals.keys).length > 0
            ? `Approvers with a key (${Object.keys(intent.approvals.keys).join(', ')}) decide only with it: \`warden approve ${intent.id} --by NAME\` or the web app's link; a signal in their name is refused.`
            : '',
        'Approve: send signal `decide` with `{"gate":"' + gate + '","decision":"approve","by":"<your name>"}`',
        'Reject: `{"gate":"' + gate + '","decision":"reject","by":"<your name>","reason":"<why>"}`',
        'With conditions: `{"gate":"' + gate + '","decision":"approve-with-conditions","by":"<your name>","conditions":["…"]}`' +
          (MERGE_CHECK_GATES.includes(gate) ? ` (here each condition is a check run before the merge: ${MERGE_CONDITION_FORMS})` : ''),
        pending.changes ? 'Request changes: `{"gate":"' + gate + '","decision":"request-changes","by":"<your name>","reason":"<the changes>"}`' : '',
        ...(state.refusedDecisions?.length
          ? [`Refused decisions (latest last):\n${state.refusedDecisions.map((r) => `- ${r.at}${r.by ? ` from "${r.by}"` : ''}: ${r.reason}`).join('\n')}`]
          : []),
        pending.document ? renderDocumentFacts(pending.document) : '',
        pending.package ? `---\n${renderReviewPackage(pending.package)}` : '',
      ]
        .filter(Boolean)
        .join('\n\n'),
    );
  }
}
