import { riskAtLeast, type RiskClass } from './risk';
import type { AgentStage } from './stages';

/**
 * Gates of the operator's own, from the config's `customGates`: after which stage, when, who may
 * decide, its timeout and policy, and whether the automation ladder may pass it. Plain data and
 * pure checks: the workflow evaluates them (the zod schema is in custom-gate-settings.ts).
 */
export interface CustomGate {
  readonly id: string;
  readonly after: AgentStage;
  /** What the person is asked. */
  readonly prompt: string;
  /** Every condition given must hold for the gate to open (none: it always opens). */
  readonly when?: {
    /** Triage's risk is at least this. */
    readonly minRisk?: RiskClass;
    /** The intent's `--env` is this. */
    readonly environment?: string;
    /** The change touches a file matching one of these globs (after impl or review). */
    readonly paths?: readonly string[];
    /** Review reported a finding of this category (after review). */
    readonly findingCategory?: string;
  };
  readonly approvers?: readonly string[];
  readonly timeout?: string;
  readonly onTimeout?: 'reject' | 'wait-again';
  readonly deferPeriod?: string;
  readonly escalateTo?: string;
  /** The automation ladder may pass it (from L3, for a LOW-risk intent whose checks hold, as it passes merge); default: a person always decides. */
  readonly ladder?: boolean;
}

/** The stages after which a custom gate can send the work back (request changes): the stage runs again. */
export const CHANGES_AFTER: readonly AgentStage[] = ['lld', 'spec', 'impl', 'review'];

/** What a custom gate's conditions are judged on; each is known only from its stage on. */
export interface CustomGateFacts {
  readonly risk?: RiskClass;
  readonly environment?: string;
  /** The changed files that match this gate's `when.paths` (the worker matched them). */
  readonly touchedPaths?: readonly string[];
  readonly findingCategories?: readonly string[];
}

/** Whether the gate opens for `facts`, and why in words. */
export function customGateOpens(gate: CustomGate, facts: CustomGateFacts): { readonly opens: boolean; readonly because: string[] } {
  const because: string[] = [];
  const when = gate.when ?? {};
  if (when.minRisk !== undefined) {
    if (!facts.risk || !riskAtLeast(facts.risk, when.minRisk)) return { opens: false, because };
    because.push(`risk ${facts.risk}`);
  }
  if (when.environment !== undefined) {
    if (facts.environment !== when.environment) return { opens: false, because };
    because.push(`environment ${when.environment}`);
  }
  if (when.paths !== undefined) {
    const touched = facts.touchedPaths ?? [];
    if (touched.length === 0) return { opens: false, because };
    because.push(`the change touches ${touched.slice(0, 5).join(', ')}${touched.length > 5 ? ` and ${touched.length - 5} more` : ''}`);
  }
  if (when.findingCategory !== undefined) {
    if (!(facts.findingCategories ?? []).includes(when.findingCategory)) return { opens: false, because };
    because.push(`review reported a ${when.findingCategory} finding`);
  }
  return { opens: true, because };
}
