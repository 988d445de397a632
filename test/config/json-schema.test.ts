import Ajv from 'ajv';
import { parseJsonc } from '../../src/config/config-text';
import { configJsonSchema, configJsonSchemaText } from '../../src/config/json-schema';
import { resolveConfig } from '../../src/config/load';
import { PROFILE_DEFAULTS } from '../../src/config/profiles';
import { PROFILES } from '../../src/config/names';
import { newConfigText } from '../../src/client/config-template';

/** A draft-07 validator of the generated schema, as an editor would use it. */
const validate = new Ajv({ allErrors: true }).compile(configJsonSchema());

/** The problems the schema finds in `value`, as `path: message`, or none. */
function schemaProblems(value: unknown): string[] {
  return validate(value) ? [] : (validate.errors ?? []).map((e) => `${e.dataPath || '(top)'}: ${e.message}`);
}

/** `text` with its commented-out settings (lines of `// "…`, `//   }`…) uncommented; prose stays a comment. */
function uncommented(text: string): string {
  return text.replace(/^(\s*)\/\/ (\s*)(?=["{}\]])/gm, '$1$2');
}

function jsonc(text: string): unknown {
  const result = parseJsonc(text);
  if (!result.ok) throw new Error(`not JSONC: ${JSON.stringify(result.problems)}`);
  return result.parsed.value;
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

  it('accepts the file warden init writes, with and without its examples uncommented, as Warden does', () => {
    const found = { testCommand: { value: 'npm test --silent', because: "package.json's test script" }, baseBranch: { value: 'main', because: 'the current branch' } };
    for (const profile of PROFILES) {
      for (const repo of [found, {}]) {
        const written = newConfigText({ schemaRef: './.warden/warden.config.schema.json', profile, approver: 'alice', ...repo });
        const examples = uncommented(written);
        for (const text of [written, examples]) {
          expect(schemaProblems(jsonc(text))).toEqual([]);
          expect(resolveConfig(jsonc(text)).profile).toBe(profile);
        }
        expect(jsonc(examples)).toMatchObject({ run: { testCommand: expect.any(String), baseBranch: 'main', paths: ['src/**', 'test/**'] }, agents: { claude: { kind: 'command', cli: 'claude' } }, routing: { default: 'claude' } });
        // Uncommented, the examples hold the profile's values: the settings in effect stay the same.
        expect(resolveConfig(jsonc(examples)).limits).toEqual(PROFILE_DEFAULTS[profile].limits);
        expect(resolveConfig(jsonc(examples)).gates).toEqual({ ...PROFILE_DEFAULTS[profile].gates, merge: { approvers: ['alice'] } });
      }
    }
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
