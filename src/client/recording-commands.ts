import type { Command } from 'commander';
import type { Recording } from '../ledger/exchange-store';
import type { RuntimeConfig } from '../runtime/config';
import { UserError } from '../shared/errors';
import type * as ExchangeStoreModule from '../ledger/exchange-store';
import type * as SessionModule from './session';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const exchangeStore = () => require('../ledger/exchange-store') as typeof ExchangeStoreModule;
const session = () => require('./session') as typeof SessionModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** `warden recording ID`: what the gateway recorded of an intent's model exchanges, one line per call. */
export function addRecordingCommand(program: Command, config: RuntimeConfig, io: Io): void {
  program
    .command('recording <id>')
    .description("The intent's recorded model exchanges, one per call through the gateway: stage, attempt, the call's order, model, outcome, and the request's and answer's sizes; whether the recording was capped and what else it kept for replay")
    .option('--json', 'print JSON (the bodies too, redacted as they were stored)')
    .action(async (id: string, flags: { json?: boolean }) => {
      const { ledger, database } = await session().openLedger(config, () => undefined);
      let recording: Recording;
      try {
        recording = await new (exchangeStore().ExchangeStore)(ledger.pool).recordingOf(id, { bodies: flags.json === true });
      } finally {
        await database.close();
      }
      if (recording.exchanges.length === 0 && !recording.context) throw new UserError(`nothing was recorded of intent ${id} (recording off, past its retention, or no model call went through the gateway)`, 1);
      if (flags.json) return io.printJson(recording);
      for (const line of formatRecording(recording)) io.print(line);
    });
}

/** The lines `warden recording` prints. */
export function formatRecording(recording: Recording): string[] {
  const lines: string[] = [];
  const { context } = recording;
  if (context) {
    const clis = Object.entries(context.cliVersions).map(([cli, version]) => `${cli} ${version}`);
    lines.push(`base ${context.baseCommit.slice(0, 12)}, config ${context.configHash.slice(0, 12)}, Warden ${context.wardenVersion}, agents ${Object.keys(context.agents).join(', ')}${clis.length ? ` (${clis.join('; ')})` : ''}`);
  }
  lines.push(`${'stage'.padEnd(8)} ${'att'.padStart(3)} ${'#'.padStart(3)}  ${'model'.padEnd(28)} ${'outcome'.padEnd(9)} ${'status'.padStart(6)} ${'request'.padStart(9)} ${'answer'.padStart(9)}`);
  for (const e of recording.exchanges) {
    const answer = `${e.answerBytes} B${e.answerKind === 'events' ? ' (stream)' : ''}`;
    lines.push(
      `${e.stage.padEnd(8)} ${String(e.attempt).padStart(3)} ${String(e.order).padStart(3)}  ${(e.modelId ?? '?').padEnd(28)} ${(e.outcome ?? '?').padEnd(9)} ${String(e.status).padStart(6)} ${`${e.requestBytes} B`.padStart(9)} ${answer.padStart(9)}${e.stored ? '' : '  not stored'}`,
    );
  }
  const bytes = recording.exchanges.filter((e) => e.stored).reduce((sum, e) => sum + e.requestBytes + e.answerBytes, 0);
  lines.push(`${recording.exchanges.length} exchange(s), ${bytes} bytes stored${recording.cappedAt ? `; capped at ${recording.cappedAt.toISOString()}: later bodies were not kept (worker.recording.maxPerIntentMb)` : ''}`);
  return lines;
}
