import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parse } from 'yaml';
import { DEV_SERVER_DYNAMIC_CONFIG } from '../src/runtime/dev-server';
import { CLUSTER_FILES, DEFAULT_FRONTEND_PORT, POSTGRES_PLUGIN, RETENTION_DAYS, schemaToolSteps, TEMPORAL_DATABASES } from '../src/runtime/temporal-cluster';
import { TEMPORAL_SERVER_VERSION } from '../src/runtime/temporal-server-install';
import { SEARCH_ATTRIBUTE_DEFINITIONS } from '../src/shared/search-attributes';

interface Service {
  image?: string;
  environment?: Record<string, string | number> | string[];
  depends_on?: string[] | Record<string, { condition?: string }>;
  healthcheck?: { test?: string | string[] };
  ports?: (string | { target: number; published: number | string })[];
  volumes?: (string | { source?: string; target: string })[];
  entrypoint?: string | string[];
  command?: string | string[];
  restart?: string;
}

const file = path.join(__dirname, '..', 'docker-compose.temporal.yml');
const text = readFileSync(file, 'utf8');
const compose = parse(text) as { services: Record<string, Service>; volumes?: Record<string, unknown> };
const services = compose.services;

function service(name: string): Service {
  const found = services[name];
  if (!found) throw new Error(`service ${name} is missing`);
  return found;
}

function env(name: string): Record<string, string> {
  const raw = service(name).environment ?? {};
  const entries = Array.isArray(raw)
    ? raw.map((line) => [line.slice(0, line.indexOf('=')), line.slice(line.indexOf('=') + 1)])
    : Object.entries(raw).map(([key, value]) => [key, String(value)]);
  return Object.fromEntries(entries);
}

function dependsOn(name: string): Record<string, string | undefined> {
  const raw = service(name).depends_on ?? [];
  return Array.isArray(raw)
    ? Object.fromEntries(raw.map((dep) => [dep, undefined]))
    : Object.fromEntries(Object.entries(raw).map(([dep, spec]) => [dep, spec.condition]));
}

/** `[host port, container port]` pairs; `127.0.0.1:7233:7233` gives `[7233, 7233]`. */
function published(name: string): [number, number][] {
  return (service(name).ports ?? []).map((port) => {
    if (typeof port === 'object') return [Number(port.published), port.target];
    const parts = port.split(':');
    return [Number(parts.at(-2)), Number(parts.at(-1))];
  });
}

function shellScript(name: string): string {
  const { entrypoint, command } = service(name);
  return [entrypoint, command].flat().filter((part) => part !== undefined).join(' ');
}

const REGISTER = 'temporal-register-search-attributes';
const SCHEMA = 'temporal-schema';

/** Runs a service's shell script with stand-ins for `commands` on PATH; returns each call's arguments. */
function runWithStandIns(name: string, commands: Record<string, string>): string[] {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'warden-compose-test-'));
  try {
    const log = path.join(dir, 'calls.log');
    for (const [command, body] of Object.entries(commands)) {
      writeFileSync(path.join(dir, command), ['#!/bin/sh', `echo "${command} $*" >> '${log}'`, body, 'exit 0'].join('\n'));
      chmodSync(path.join(dir, command), 0o755);
    }
    const script = [service(name).command].flat().join('\n').replace(/\$\$/g, '$');
    execFileSync('/bin/sh', ['-c', script], {
      env: { ...env(name), PATH: `${dir}:${process.env.PATH}` },
      timeout: 60_000, // a hang guard: the script with stand-ins runs in milliseconds
    });
    return readFileSync(log, 'utf8').split('\n').filter(Boolean);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

describe('docker-compose.temporal.yml', () => {
  it('defines the cluster services', () => {
    for (const name of ['postgresql', SCHEMA, 'temporal', 'temporal-ui', 'temporal-admin-tools', REGISTER]) {
      expect(services[name]).toBeDefined();
    }
  });

  it('pins every image to an explicit, non-latest tag', () => {
    for (const [name, spec] of Object.entries(services)) {
      const image = spec.image ?? '';
      const afterSlash = image.slice(image.lastIndexOf('/') + 1);
      const tag = afterSlash.includes(':') ? afterSlash.slice(afterSlash.indexOf(':') + 1) : '';
      expect({ name, tag: tag !== '' && tag !== 'latest' && !tag.includes('$') }).toEqual({ name, tag: true });
    }
    expect(text).not.toMatch(/:latest\b/);
  });

  it('sets up the schema once postgresql is healthy, and starts temporal once that is done', () => {
    expect(dependsOn(SCHEMA)).toMatchObject({ postgresql: 'service_healthy' });
    expect(dependsOn('temporal')).toMatchObject({ [SCHEMA]: 'service_completed_successfully' });
    expect(service(SCHEMA).restart).toBe('no');
    const check = [service('postgresql').healthcheck?.test ?? []].flat().join(' ');
    expect(check).toContain('pg_isready');
  });

  it('keeps the database on a named volume', () => {
    const mounts = (service('postgresql').volumes ?? []).map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`));
    const data = mounts.find((mount) => mount.endsWith(':/var/lib/postgresql/data'));
    expect(data).toBeDefined();
    expect(compose.volumes).toHaveProperty(data!.split(':')[0]!);
  });

  it('runs the Temporal server version that cluster:up builds, with tools of the same version', () => {
    expect(service('temporal').image).toBe(`temporalio/server:${TEMPORAL_SERVER_VERSION}`);
    for (const name of [SCHEMA, 'temporal-admin-tools', REGISTER]) expect(service(name).image).toBe(`temporalio/admin-tools:${TEMPORAL_SERVER_VERSION}`);
  });

  it('publishes the frontend on the port cluster:up uses, and the UI on 8080', () => {
    expect(DEFAULT_FRONTEND_PORT).toBe(7233);
    expect(published('temporal')).toContainEqual([DEFAULT_FRONTEND_PORT, 7233]);
    expect(published('temporal-ui')).toContainEqual([8080, 8080]);
  });

  it('points the UI and the tools at temporal:7233', () => {
    expect(env('temporal-ui').TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(env('temporal-admin-tools').TEMPORAL_ADDRESS).toBe('temporal:7233');
    expect(env(REGISTER).TEMPORAL_ADDRESS).toBe('temporal:7233');
  });

  it('gives temporal the database settings postgresql was created with', () => {
    const temporal = env('temporal');
    const postgres = env('postgresql');
    expect(temporal.DB).toMatch(/^postgres12/);
    expect(services[temporal.POSTGRES_SEEDS!]).toBe(services.postgresql);
    expect(temporal.DB_PORT).toBe('5432');
    expect(temporal.POSTGRES_USER).toBe(postgres.POSTGRES_USER);
    expect(temporal.POSTGRES_PWD).toBe(postgres.POSTGRES_PASSWORD);
    const check = [service('postgresql').healthcheck?.test ?? []].flat().join(' ');
    expect(check).toContain(`-U ${postgres.POSTGRES_USER}`);
    expect({ database: temporal.DBNAME, visibilityDatabase: temporal.VISIBILITY_DBNAME }).toEqual(TEMPORAL_DATABASES);
  });

  it('starts temporal with the dynamic config cluster:up uses', () => {
    const mounts = (service('temporal').volumes ?? []).map((v) => (typeof v === 'string' ? v : `${v.source}:${v.target}`));
    const dynamic = `/etc/temporal/${env('temporal').DYNAMIC_CONFIG_FILE_PATH}`;
    const mount = mounts.find((m) => m.split(':')[1] === dynamic);
    expect(mount).toBeDefined();
    expect(path.resolve(path.dirname(file), mount!.split(':')[0]!)).toBe(CLUSTER_FILES.dynamicConfig);
  });

  it("its dynamic config sets what Warden's dev server sets, to the same values (poll rates, eager start and dispatch)", () => {
    const dynamic = parse(readFileSync(CLUSTER_FILES.dynamicConfig, 'utf8')) as Record<string, { value: unknown }[]>;
    for (const [key, value] of Object.entries(DEV_SERVER_DYNAMIC_CONFIG)) {
      expect({ key, values: dynamic[key]?.map((v) => v.value) }).toEqual({ key, values: [value] });
    }
  });

  it('sets up both databases with the schema tool steps cluster:up runs', () => {
    const schema = env(SCHEMA);
    const postgres = env('postgresql');
    expect(schema.SQL_PLUGIN).toBe(POSTGRES_PLUGIN);
    expect(env('temporal').DB).toBe(POSTGRES_PLUGIN);
    expect(services[schema.SQL_HOST!]).toBe(services.postgresql);
    expect(schema.SQL_USER).toBe(postgres.POSTGRES_USER);
    expect(schema.SQL_PASSWORD).toBe(postgres.POSTGRES_PASSWORD);
    expect(shellScript(SCHEMA).replace(/\$\$/g, '')).not.toContain('$');
    const calls = runWithStandIns(SCHEMA, { 'temporal-sql-tool': '' }).map((call) => call.split(' ').slice(1));
    // cluster:up creates the databases itself (owned by the server's role); the image's user may.
    const created = calls.filter((args) => args[2] === 'create-database').map((args) => args[1]);
    expect(created).toEqual([TEMPORAL_DATABASES.database, TEMPORAL_DATABASES.visibilityDatabase]);
    const steps = calls.filter((args) => args[2] !== 'create-database').map(([flag, database, ...args]) => ({ flag, database, args }));
    expect(steps).toEqual(schemaToolSteps(schema.SCHEMA_ROOT!, TEMPORAL_DATABASES).map((step) => ({ flag: '--database', ...step })));
  });

  describe('search attribute registration', () => {
    it('lists exactly SEARCH_ATTRIBUTE_DEFINITIONS', () => {
      const listed = Object.fromEntries(
        (env(REGISTER).WARDEN_SEARCH_ATTRIBUTES ?? '').split(/\s+/).filter(Boolean).map((pair) => pair.split('=')),
      );
      expect(listed).toEqual(SEARCH_ATTRIBUTE_DEFINITIONS);
    });

    it('waits for temporal, runs once and escapes every $ from compose', () => {
      expect(Object.keys(dependsOn(REGISTER))).toContain('temporal');
      expect(service(REGISTER).restart).toBe('no');
      const script = shellScript(REGISTER);
      expect(script).toContain('temporal operator search-attribute create');
      // Compose interpolates a single `$`; the shell's variables must be written `$$`.
      expect(script.replace(/\$\$/g, '')).not.toContain('$');
    });

    it('creates each missing attribute, with its type, through the temporal CLI', () => {
      // The namespace exists, WardenGate is already registered.
      const calls = runWithStandIns(REGISTER, { temporal: 'case "$*" in *"search-attribute list"*) printf "Name Type\\nWardenGate Keyword\\n";; esac' });
      expect(calls.some((call) => call.includes('namespace create'))).toBe(false);
      const created = calls
        .filter((call) => call.startsWith('temporal operator search-attribute create'))
        .map((call) => {
          expect(call).toContain('--namespace default');
          expect(call).toContain('--address temporal:7233');
          return [/--name (\S+)/.exec(call)?.[1], /--type (\S+)/.exec(call)?.[1]];
        });
      const expected = Object.entries(SEARCH_ATTRIBUTE_DEFINITIONS).filter(([name]) => name !== 'WardenGate');
      expect(created).toEqual(expected);
    });

    it('registers a missing namespace with the retention cluster:up gives one', () => {
      const calls = runWithStandIns(REGISTER, { temporal: 'case "$*" in *"namespace describe"*) exit 1;; esac' });
      const create = calls.find((call) => call.startsWith('temporal operator namespace create'));
      expect(create).toContain('--namespace default');
      expect(create).toContain(`--retention ${RETENTION_DAYS}d`);
    });
  });
});
