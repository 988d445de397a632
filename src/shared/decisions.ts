import { GATE_KINDS, isGateName, type GateName } from './gates';
import { proofShapeProblem, type DecisionProof } from './decision-proof';
import { undecodableReason } from './undecodable';

/** Set in every agent process's environment: a decision sent from there is the agent's own. */
export const AGENT_SESSION_VARIABLE = 'WARDEN_AGENT_SESSION';

/**
 * approve; reject (with a reason); approve with conditions for the next stage; defer once;
 * request changes (the stage before the gate runs again with the reason as the person's
 * comments, where the gate allows it); approve with edits (the person's version of the
 * document is what the next stage gets, at the lld and spec gates).
 */
export const DECISION_KINDS = ['approve', 'reject', 'approve-with-conditions', 'defer', 'request-changes', 'approve-with-edits'] as const;
export type DecisionKind = (typeof DECISION_KINDS)[number];

/**
 * Payload of the `decide` signal and update. Anyone with access to the namespace can send it
 * (CLI or Web UI), so the workflow validates it (parseDecision); an invalid or unauthorised one
 * changes nothing and is recorded as a refused decision.
 */
export interface Decision {
  /** A built-in gate, or a custom gate's id. */
  readonly gate: GateName;
  readonly decision: DecisionKind;
  readonly by: string;
  readonly reason?: string;
  /** With approve-with-conditions: what the next stage must respect (added to its prompt). */
  readonly conditions?: string[];
  /** With approve-with-edits: the whole document as the person edited it. */
  readonly document?: string;
  /**
   * Set by the CLI when it runs inside an agent's process (WARDEN_AGENT_SESSION is in its
   * environment): such a decision is the agent deciding its own gate, and is refused.
   */
  readonly agentSession?: string;
  /** The approver's signature (see decision-proof.ts); without it, the decision counts only where unsigned ones are trusted. */
  readonly proof?: DecisionProof;
}

/** The longest approver name: names are identities, not messages. */
export const MAX_BY_LENGTH = 100;
export const MAX_REASON_LENGTH = 2000;
export const MAX_CONDITIONS = 20;
export const MAX_CONDITION_LENGTH = 1000;
/** An edited document travels in the decision, and so in the workflow's history: bounded. */
export const MAX_DOCUMENT_LENGTH = 100_000;
const MAX_AGENT_SESSION_LENGTH = 200;

export type ParsedDecision = { readonly ok: true; readonly decision: Decision } | { readonly ok: false; readonly problems: string };

/**
 * Validates a decide payload: the client checks it before sending and the workflow again on
 * receipt. Strings are trimmed; unknown fields are dropped. Plain code rather than zod, because
 * it runs in workflow code (see schema-primitives.ts). `problems` reads `field: problem; …`.
 */
export function parseDecision(raw: unknown): ParsedDecision {
  const undecodable = undecodableReason(raw);
  if (undecodable !== undefined) return { ok: false, problems: `the payload could not be decoded (${undecodable})` };
  if (typeof raw !== 'object' || raw === null || Array.isArray(raw)) return { ok: false, problems: 'a decision must be an object' };
  const input = raw as Record<string, unknown>;
  const problems: string[] = [];
  const problem = (field: string, text: string): void => void problems.push(`${field}: ${text}`);

  const gate = input.gate;
  if (!isGateName(gate)) problem('gate', `expected one of ${GATE_KINDS.join(', ')}, or a custom gate's id`);
  const decision = input.decision;
  if (!(DECISION_KINDS as readonly unknown[]).includes(decision)) problem('decision', `expected one of ${DECISION_KINDS.join(', ')}`);
  const by = typeof input.by === 'string' ? input.by.trim() : undefined;
  if (by === undefined) problem('by', 'expected a string');
  else if (!by) problem('by', 'a decision must say who made it');
  else if (by.length > MAX_BY_LENGTH) problem('by', `at most ${MAX_BY_LENGTH} characters`);
  let proof: DecisionProof | undefined;
  if (input.proof !== undefined) {
    const shape = proofShapeProblem(input.proof);
    if (shape) problem('proof', shape);
    else {
      const p = input.proof as DecisionProof;
      proof = { nonce: p.nonce, signedAt: p.signedAt, gateOpenedAt: p.gateOpenedAt, signature: p.signature };
    }
  }

  const reason = optionalString(input.reason, 'reason', MAX_REASON_LENGTH, problem);
  const document = optionalString(input.document, 'document', MAX_DOCUMENT_LENGTH, problem, false);
  const agentSession = optionalString(input.agentSession, 'agentSession', MAX_AGENT_SESSION_LENGTH, problem, false);
  let conditions: string[] | undefined;
  if (input.conditions !== undefined) {
    if (!Array.isArray(input.conditions)) problem('conditions', 'expected an array of strings');
    else {
      if (input.conditions.length > MAX_CONDITIONS) problem('conditions', `at most ${MAX_CONDITIONS} conditions`);
      conditions = input.conditions.map((condition: unknown, i) => {
        const text = typeof condition === 'string' ? condition.trim() : undefined;
        if (text === undefined) problem(`conditions.${i}`, 'expected a string');
        else if (!text) problem(`conditions.${i}`, 'a condition must not be empty');
        else if (text.length > MAX_CONDITION_LENGTH) problem(`conditions.${i}`, `at most ${MAX_CONDITION_LENGTH} characters`);
        return text ?? '';
      });
    }
  }
  if (problems.length === 0) {
    if (decision === 'reject' && !reason) problem('reason', 'a rejection needs a reason');
    if (decision === 'approve-with-conditions' && !conditions?.length) problem('conditions', 'approve-with-conditions needs at least one condition');
    if (decision === 'request-changes' && !reason) problem('reason', 'request-changes needs the changes asked for, as the reason');
    if (decision === 'approve-with-edits' && !document?.trim()) problem('document', 'approve-with-edits needs the edited document');
    if (decision !== 'approve-with-edits' && document !== undefined) problem('document', 'only approve-with-edits carries a document');
  }
  if (problems.length > 0) return { ok: false, problems: problems.join('; ') };
  return {
    ok: true,
    decision: {
      gate: gate as GateName,
      decision: decision as DecisionKind,
      by: by as string,
      ...(reason !== undefined ? { reason } : {}),
      ...(conditions !== undefined ? { conditions } : {}),
      ...(document !== undefined ? { document } : {}),
      ...(agentSession !== undefined ? { agentSession } : {}),
      ...(proof !== undefined ? { proof } : {}),
    },
  };
}

/** An optional string field, trimmed unless `trim` is false; its problems are reported through `problem`. */
function optionalString(
  value: unknown,
  field: string,
  maxLength: number,
  problem: (field: string, text: string) => void,
  trim = true,
): string | undefined {
  if (value === undefined) return undefined;
  if (typeof value !== 'string') {
    problem(field, 'expected a string');
    return undefined;
  }
  const text = trim ? value.trim() : value;
  if (text.length > maxLength) problem(field, `at most ${maxLength} characters`);
  return text;
}

/** What the `decide` update answers. */
export interface DecisionAnswer {
  readonly accepted: boolean;
  /** Why it was refused, when it was. */
  readonly reason?: string;
}

/** A decision as the workflow recorded it. */
export interface RecordedDecision extends Decision {
  /** ISO time the workflow received it (workflow time, deterministic). */
  readonly at: string;
  /** True when no one decided and the gate's timeout policy did. */
  readonly timedOut: boolean;
  /** True when the decision carried a valid signature of its approver. */
  readonly signed?: boolean;
  /**
   * Where a decision read from the team's forge was made (a review or comment by a reviewer the
   * config maps to this approver, with its address): the forge authenticated its author.
   */
  readonly via?: string;
}
