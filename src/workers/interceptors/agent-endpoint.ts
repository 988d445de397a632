import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { baseUrlOf } from '../../activities/agents/model-http';
import { endpointKey } from '../../safety/circuit-breaker';
import { agentIdOf } from '../../shared/agent-routing';
import type { AgentProfile } from '../../shared/intent';

/** Which agent, model and endpoint an agent call goes to. */
export interface AgentEndpoint {
  /** As cost events name it: the profile's name, or its kind when it has none. */
  readonly agentId: string;
  readonly modelId: string;
  /** The circuit breaker's key. */
  readonly endpoint: string;
}

/**
 * The agent, model and endpoint of a profile. A scripted agent's model is its script's `model`
 * (each script is an endpoint of its own); a command agent's endpoint is its program.
 */
export async function agentEndpoint(agent: AgentProfile): Promise<AgentEndpoint> {
  // A named profile is an agent of its own: its own rate limits and day budget.
  const agentId = agentIdOf(agent);
  const declared = (agent as { model?: unknown }).model;
  if (typeof declared === 'string' && declared) {
    const baseUrl = agent.kind === 'anthropic' || agent.kind === 'openai' ? baseUrlOf(agent) : undefined;
    return { agentId, modelId: declared, endpoint: endpointKey({ kind: agent.kind, baseUrl, model: declared }) };
  }
  if (agent.kind === 'scripted') {
    const model = await readScriptModel(agent.scriptPath);
    return { agentId, modelId: model, endpoint: `scripted/${model}` };
  }
  if (agent.kind === 'command') {
    const program = path.basename(agent.command.trim().split(/\s+/)[0] ?? 'command');
    return { agentId, modelId: agent.kind, endpoint: `command/${program}` };
  }
  return { agentId, modelId: agent.kind, endpoint: agent.kind };
}

async function readScriptModel(scriptPath: string): Promise<string> {
  try {
    const model = (JSON.parse(await readFile(scriptPath, 'utf8')) as { model?: unknown }).model;
    return typeof model === 'string' && model ? model : 'scripted';
  } catch {
    // The agent itself reports a bad script, as a non-retryable failure.
    return 'scripted';
  }
}
