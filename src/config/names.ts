/**
 * The config's names a command line needs before it reads a config: its file names, its schema
 * file and its profiles. Kept apart from the schema, so naming them loads no validation code.
 */

/** File names looked for in the working directory when no path is given. */
export const CONFIG_FILE_NAMES = ['warden.config.json', 'warden.config.ts'] as const;

/** The file name of the config's JSON Schema: in the package's dist/, or in a repository's .warden/. */
export const CONFIG_SCHEMA_FILE = 'warden.config.schema.json';

export const PROFILES = ['conservative', 'default', 'aggressive', 'production'] as const;
export type ProfileName = (typeof PROFILES)[number];
