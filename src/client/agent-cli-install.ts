import path from 'node:path';
import type { AgentCli } from '../activities/agents/cli-invocations';
import { runInstaller } from '../runtime/debian-packages';
import { AGENT_CLIS } from '../shared/agent-profiles';
import { findCliProgram } from './intent-input';

/** The installer of the pinned agent CLIs, shipped with the package (`npm run tools:install` in a checkout). */
const INSTALLER = path.resolve(__dirname, '../../scripts/install-agent-clis.sh');

/**
 * On first use of `--agent aider|codex|claude`, installs that CLI's pinned version under the
 * Warden home's tools folder, saying so in one line (aider from PyPI, the others from npm).
 * Nothing happens when it is found (on PATH or installed), when `--cmd` names the program, when
 * the flags a run needs are missing, or with WARDEN_INSTALL=0: the run then says what is wrong.
 */
export async function installAgentCliOnFirstUse(flags: { agent?: string; cmd?: string; model?: string; goal?: string; repo?: string }, toolsDir: string, log: (line: string) => void, env: NodeJS.ProcessEnv = process.env): Promise<void> {
  const cli = flags.agent;
  if (cli === undefined || !(AGENT_CLIS as readonly string[]).includes(cli) || flags.cmd || env.WARDEN_INSTALL === '0') return;
  // A run that will be refused for its flags installs nothing first.
  if (!flags.model?.trim() || !flags.goal?.trim() || !flags.repo) return;
  if (findCliProgram(cli as AgentCli, toolsDir)) return;
  log(`${cli} is not installed: installing its pinned version under ${toolsDir} (once; a minute or so)`);
  try {
    await runInstaller('bash', [INSTALLER, cli], { WARDEN_TOOLS_DIR: toolsDir });
  } catch (error) {
    const detail = (error instanceof Error ? error.message : String(error)).trim().split('\n').slice(-1)[0];
    log(`installing ${cli} failed: ${detail}`);
  }
}
