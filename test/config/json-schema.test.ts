import Ajv from 'ajv';
import { configJsonSchema, configJsonSchemaText } from '../../src/config/json-schema';
import { resolveConfig } from '../../src/config/load';
import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { PROFILES } from '../../src/config/schema';

/** A draft-07 validator of the generated schema, as an editor would use it. */
const validate = new Ajv({ allErrors: true }).compile(configJsonSchema());

/** The problems the schema finds in `value`, as `path: message`, or none. */
function schemaProblems(value: unknown): string[] {
  return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.dataPath || '(top)'}: ${e.message}`);
}

describe('the JSON Schema made from the config schema', () => {
  it('is draft-07, lets VS Code take comments and trailing commas, and is written as it is made', () => {
    const schema = configJsonSchema();
    expect(schema).toMatchObject({ $schema: 'http://json-schema.org/draft-07/schema#', type: 'object', additionalProperties: false, allowComments: true, allowTrailingCommas: true });
    expect(JSON.parse(configJsonSchemaText())).toEqual(schema);
  });

  it("accepts every profile's configuration written out in full, and an empty file", () => {
    for (const profile of PROFILES) expect(schemaProblems(PROFILE_DEFAULTS[profile])).toEqual([]);
    expect(schemaProblems({})).toEqual([]);
  });

  it('rejects what Warden rejects by type, choice or name: a number for a USD string, an unknown profile, a typo, an agent without its kind', () => {
    expect(schemaProblems({ limits: { budgetUsd: 5 } })).toEqual(['.limits.budgetUsd: should be string']);
    expect(schemaProblems({ profile: 'careful' })).toEqual(['.profile: should be equal to one of the allowed values']);
    expect(schemaProblems({ limits: { budgetUSD: '5' } })).toEqual(['.limits: should NOT have additional properties']);
    expect(schemaProblems({ agents: { planner: { model: 'gpt-4.1' } } })).not.toEqual([]);
    for (const bad of [{ limits: { budgetUsd: 5 } }, { profile: 'careful' }, { limits: { budgetUSD: '5' } }, { agents: { planner: { model: 'gpt-4.1' } } }]) {
      expect(() => resolveConfig(bad)).toThrow();
    }
  });
});
