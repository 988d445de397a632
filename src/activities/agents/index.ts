import type { AgentProfile } from '../../shared/intent';
import type { ModelGateway } from '../../gateway/gateway';
import type { Agent } from './agent';
import { createCommandAgent } from './command-agent';
import { createHttpAgent, type HttpAgentDeps } from './http-agent';
import { createScriptedAgent } from './scripted-agent';

export type { Agent, AgentRequest, AgentResult, Usage } from './agent';
export { SpendMeter, type BudgetBook, type OpenCall, type PaidCall } from '../../gateway/spend-meter';

/** What agents need from the worker: HTTP agents their mode and fetch, command agents the gateway. */
export type AgentDeps = HttpAgentDeps & { readonly gateway?: ModelGateway };

/** Builds the agent a profile names. */
export function createAgent(profile: AgentProfile, deps: AgentDeps = { mode: 'development', env: process.env }): Agent {
  switch (profile.kind) {
    case 'scripted':
      return createScriptedAgent(profile.scriptPath);
    case 'command':
      return createCommandAgent(profile, { gateway: deps.gateway });
    case 'anthropic':
    case 'openai':
      return createHttpAgent(profile, deps);
  }
}
