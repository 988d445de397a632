import { z } from 'zod';
import { ConfigFileSchema } from './schema';

/**
 * The JSON Schema of a config file, made from the zod schema that validates it, for editors to
 * complete and check warden.config.json with. Draft-07, the draft editors support best. It holds
 * each field's type, range, pattern and choices; what zod checks in code (a duration above zero,
 * a warning rate below the critical one) only `warden config check` sees.
 *
 * `allowComments` and `allowTrailingCommas` are VS Code's own keywords (other validators ignore
 * them): its JSON editor then takes the config's comments without complaint, as it does for
 * tsconfig.json.
 */
export function configJsonSchema(): Record<string, unknown> {
  // An unrepresentable type throws rather than becoming an empty schema that accepts anything.
  const { $schema, ...schema } = z.toJSONSchema(ConfigFileSchema, { target: 'draft-7', io: 'input', unrepresentable: 'throw' });
  return {
    $schema,
    title: 'Warden config (warden.config.json)',
    description: "A profile's defaults with these overrides. JSON with comments; `warden config check` validates it and prints the result.",
    allowComments: true,
    allowTrailingCommas: true,
    ...schema,
  };
}

/** The schema as the file holds it. */
export function configJsonSchemaText(): string {
  return `${JSON.stringify(configJsonSchema(), null, 2)}\n`;
}
