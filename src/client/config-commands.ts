import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Command } from 'commander';
import type * as JsonSchemaModule from '../config/json-schema';
import type * as LoadModule from '../config/load';

/* eslint-disable @typescript-eslint/no-require-imports -- loaded when a command runs (see cli.ts) */
const jsonSchema = () => require('../config/json-schema') as typeof JsonSchemaModule;
const load = () => require('../config/load') as typeof LoadModule;
/* eslint-enable @typescript-eslint/no-require-imports */

interface Io {
  readonly print: (line: string) => void;
  readonly printJson: (value: unknown) => void;
}

/** `warden config check` exits with this when the file is not a valid config (as for any bad input). */
export const INVALID_CONFIG_EXIT = 2;

/** `warden config check` and `warden config schema`. `configFile` is the file --config or $WARDEN_CONFIG names. */
export function addConfigCommands(program: Command, io: Io, configFile: () => string | undefined): void {
  const config = program.command('config').description('The config file: check it, or print its JSON Schema');

  config
    .command('check [file]')
    .description(
      'Validate a config file (default: --config, else $WARDEN_CONFIG, else warden.config.json or .ts here) and print the effective configuration (its profile with the overrides). ' +
        `An invalid file exits ${INVALID_CONFIG_EXIT}, each problem on stderr as file:line:column: field: message`,
    )
    .option('--json', 'print JSON: the source and the configuration, or the problems')
    .action((file: string | undefined, flags: { json?: boolean }) => {
      let loaded: ReturnType<typeof LoadModule.loadConfig>;
      try {
        loaded = load().loadConfig(file ?? configFile());
      } catch (error) {
        if (!(error instanceof load().ConfigFileError)) throw error;
        process.exitCode = INVALID_CONFIG_EXIT;
        if (flags.json) return io.printJson({ source: error.file, problems: error.problems });
        for (const problem of error.problems) process.stderr.write(`${load().formatPlacedProblem(problem)}\n`);
        return;
      }
      const { config: effective, source } = loaded;
      if (flags.json) return io.printJson({ source: source ?? null, config: effective });
      io.print(`${source ?? 'no config file: the default profile'} is valid. Effective configuration:`);
      io.print(JSON.stringify(effective, null, 2));
    });

  config
    .command('schema')
    .description("Print the config file's JSON Schema, which editors complete and check warden.config.json with (warden init points the file's $schema at it)")
    .option('--output <file>', 'write it to this file instead (its folder is created)')
    .action((flags: { output?: string }) => {
      const text = jsonSchema().configJsonSchemaText();
      if (flags.output === undefined) {
        process.stdout.write(text);
        return;
      }
      mkdirSync(path.dirname(path.resolve(flags.output)), { recursive: true });
      writeFileSync(flags.output, text);
      io.print(`wrote ${flags.output}`);
    });
}
