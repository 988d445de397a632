import type { AgentProfile } from '../../shared/intent';
import type { Agent } from './agent';
import { createCommandAgent } from './command-agent';
import { createHttpAgent, type HttpAgentDeps } from './http-agent';
import { createScriptedAgent } from './scripted-agent';

export type { Agent, AgentRequest, AgentResult, Usage } from './agent';
export { SpendMeter, type BudgetBook, type OpenCall, type PaidCall } from '../../gateway/spend-meter';

/** What HTTP agents need from the worker; scripted and command agents need nothing. */
export type AgentDeps = HttpAgentDeps;

/** Builds the agent a profile names. */
export function createAgent(profile: AgentProfile, deps: AgentDeps = { mode: 'development', env: process.env }): Agent {
  switch (profile.kind) {
    case 'scripted':
      return createScriptedAgent(profile.scriptPath);
    case 'command':
      return createCommandAgent(profile);
    case 'anthropic':
    case 'openai':
      return createHttpAgent(profile, deps);
  }
}
