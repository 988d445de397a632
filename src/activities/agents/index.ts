import type { AgentProfile } from '../../shared/intent';
import type { Agent } from './agent';
import { createCommandAgent } from './command-agent';
import { createScriptedAgent } from './scripted-agent';

export type { Agent, AgentRequest, AgentResult, Usage } from './agent';

/** Builds the agent a profile names. */
export function createAgent(profile: AgentProfile): Agent {
  switch (profile.kind) {
    case 'scripted':
      return createScriptedAgent(profile.scriptPath);
    case 'command':
      return createCommandAgent(profile);
  }
}
