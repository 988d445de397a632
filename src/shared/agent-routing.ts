import type { AgentProfile, CommandAgentProfile, Intent, IntentInput } from './intent';
import type { AgentStage } from './stages';

/**
 * The agent's identity across Warden: its ledger rows (cost, events), the worker's per-agent rate
 * limits and day budget, its automation-ladder scope, and the names that may not decide its gates.
 * A named profile is itself; an unnamed one is its kind.
 */
export function agentIdOf(agent: { readonly kind: string; readonly name?: string }): string {
  return agent.name ?? agent.kind;
}

/** The agent profile that runs `stage` of this intent. */
export function agentForStage(intent: Pick<Intent, 'agent' | 'stageAgents'>, stage: AgentStage): AgentProfile {
  return intent.stageAgents[stage] ?? intent.agent;
}

/**
 * The profile one agent call runs on: its stage's, except the review of a design document
 * (lld, spec), which runs on the reviewer routed to `review`.
 */
export function agentForCall(intent: Pick<Intent, 'agent' | 'stageAgents'>, call: { readonly stage: AgentStage; readonly designReview?: boolean }): AgentProfile {
  return agentForStage(intent, call.designReview ? 'review' : call.stage);
}

/** Whether the profile calls a model over HTTP, so each call's maximum cost is known before it is made. */
export function callsModelOverHttp(profile: AgentProfile): boolean {
  return profile.kind === 'anthropic' || profile.kind === 'openai';
}

/**
 * A profile's model family, for the cross-model review rule: the provider and the model's
 * leading name (claude-sonnet-4-5 → anthropic/claude; gpt-4.1 → openai/gpt). A command agent
 * with an upstream is its upstream's family; other command and scripted agents are their own
 * families (by program or script).
 */
export function modelFamily(profile: AgentProfile): string {
  switch (profile.kind) {
    case 'anthropic':
    case 'openai':
      return `${profile.kind}/${(/^[a-z]+/i.exec(profile.model)?.[0] ?? profile.model).toLowerCase()}`;
    case 'command':
      // A CLI is as much its model's family as the model it calls through the gateway.
      if (profile.upstream) return modelFamily(profile.upstream);
      return `command/${profile.command.trim().split(/\s+/)[0]?.split('/').pop() ?? 'command'}`;
    case 'scripted':
      return `scripted/${profile.name ?? profile.scriptPath}`;
  }
}

/** The model a profile asks for, if it names one (an HTTP agent's, or a command agent's upstream). */
export function modelOf(profile: AgentProfile | IntentInput['agent']): string | undefined {
  if (profile.kind === 'anthropic' || profile.kind === 'openai') return profile.model;
  if (profile.kind === 'command') return profile.upstream?.model;
  return undefined;
}

/**
 * Models a stage may not call, enforced at the gateway: review may not use a forbidden reviewer,
 * nor the model that built the change when the policy asks for another family; a design review
 * neither a forbidden reviewer nor the model that wrote the document.
 */
export function modelsForbiddenAt(intent: Pick<Intent, 'agent' | 'stageAgents' | 'reviewPolicy'>, stage: AgentStage, designReview = false): string[] {
  // A design document's reviewer may never answer as the model that wrote it.
  if (designReview) {
    const author = modelOf(agentForStage(intent, stage));
    return [...intent.reviewPolicy.forbiddenReviewers, ...(author ? [author] : [])];
  }
  if (stage !== 'review') return [];
  const forbidden = [...intent.reviewPolicy.forbiddenReviewers];
  const builder = modelOf(agentForStage(intent, 'impl'));
  if (intent.reviewPolicy.requireDifferentFamily && builder) forbidden.push(builder);
  return forbidden;
}

/** The network a command agent gets: its `network`, else the gateway when it names an upstream model, else none. */
export function networkOf(profile: Pick<CommandAgentProfile, 'network' | 'upstream'>): 'gateway' | 'none' | 'host' {
  return profile.network ?? (profile.upstream ? 'gateway' : 'none');
}

/** Whether the profile's model calls go through the worker's model gateway (HTTP agents, and command agents on `network: 'gateway'`). */
export function callsThroughGateway(profile: AgentProfile): boolean {
  return callsModelOverHttp(profile) || (profile.kind === 'command' && networkOf(profile) === 'gateway');
}

/** Why the design reviewer may not review the lld or spec, or undefined when it may. */
export function designReviewViolation(intent: Pick<Intent, 'agent' | 'stageAgents' | 'reviewPolicy'>): string | undefined {
  const reviewer = agentForStage(intent, 'review');
  const reviewerModel = modelOf(reviewer) ?? modelFamily(reviewer);
  if (intent.reviewPolicy.forbiddenReviewers.some((m) => m === reviewerModel || reviewerModel.startsWith(`${m}-`))) {
    return `${reviewerModel} is never allowed to review (reviewPolicy.forbiddenReviewers)`;
  }
  for (const stage of ['lld', 'spec'] as const) {
    const author = agentForStage(intent, stage);
    const authorModel = modelOf(author);
    if (authorModel !== undefined && authorModel === modelOf(reviewer)) {
      return `the design review of ${stage} would run on ${authorModel}, the model that writes it (route review to another model)`;
    }
    if (intent.reviewPolicy.requireDifferentFamily && modelFamily(author) === modelFamily(reviewer)) {
      return `the design review of ${stage} would run on ${modelFamily(reviewer)} (${agentIdOf(reviewer)}), the family that writes it; the policy asks for another`;
    }
  }
  return undefined;
}
