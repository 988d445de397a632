import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { describeWith, programPath } from '../setup/prerequisites';

/**
 * The shipped alerting rules pass Debian's promtool: `check rules` (they load), and `test rules`
 * with made-up series (test/prometheus/warden-alerts.promtool.yml), which covers every alert,
 * the ones a real worker cannot be driven into quickly (a stage stuck for 90 minutes) included.
 */

const ROOT = path.resolve(__dirname, '../..');
const RULES = path.join(ROOT, 'deploy/prometheus/warden-alerts.yml');
const UNIT_TESTS = path.join(__dirname, 'warden-alerts.promtool.yml');

const promtool = (...args: string[]) => {
  const result = spawnSync(path.join(path.dirname(programPath('prometheus')!), 'promtool'), args, { encoding: 'utf8' });
  return { code: result.status, output: `${result.stdout}${result.stderr}` };
};

const alertNames = (file: string): string[] => {
  const rules = parse(readFileSync(file, 'utf8')) as { groups: Array<{ rules: Array<{ alert?: string }> }> };
  return rules.groups.flatMap((g) => g.rules.flatMap((r) => (r.alert ? [r.alert] : [])));
};

describeWith('prometheus', 'the alerting rules', () => {
  test('pass promtool check rules', () => {
    const result = promtool('check', 'rules', RULES);
    expect(result.output).toContain('SUCCESS: 5 rules found');
    expect(result.code).toBe(0);
  });

  test('fire on their conditions in promtool test rules, every alert among them', () => {
    const result = promtool('test', 'rules', UNIT_TESTS);
    expect(result.output).toContain('SUCCESS');
    expect(result.code).toBe(0);
    const tests = parse(readFileSync(UNIT_TESTS, 'utf8')) as { tests: Array<{ alert_rule_test: Array<{ alertname: string; exp_alerts: unknown[] }> }> };
    const firedInTests = new Set(tests.tests.flatMap((t) => t.alert_rule_test.filter((a) => a.exp_alerts.length > 0).map((a) => a.alertname)));
    expect([...firedInTests].sort()).toEqual(alertNames(RULES).sort());
  });

  test('promtool check rules refuses a broken rule (the check can fail)', () => {
    const broken = path.join(mkdtempSync(path.join(tmpdir(), 'warden-rules-')), 'broken.yml');
    writeFileSync(broken, 'groups:\n  - name: x\n    rules:\n      - alert: Broken\n        expr: warden_ledger_up ==\n');
    const result = promtool('check', 'rules', broken);
    expect(result.code).not.toBe(0);
  });
});
