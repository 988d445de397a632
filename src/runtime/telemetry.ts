import type { ClientInterceptors } from '@temporalio/client';
import type { WorkerOptions } from '@temporalio/worker';
import type * as OtlpHttp from '@opentelemetry/exporter-trace-otlp-http';
import type * as Resources from '@opentelemetry/resources';
import type * as TraceBase from '@opentelemetry/sdk-trace-base';
import type * as TemporalOtel from '@temporalio/interceptors-opentelemetry';

/** `WARDEN_TELEMETRY=0` turns every metric and trace export off, whatever the config says. */
export function telemetryEnabled(env: NodeJS.ProcessEnv): boolean {
  return env.WARDEN_TELEMETRY !== '0';
}

/** What a worker and a client add to trace through OpenTelemetry, and how to flush at the end. */
export interface Tracing {
  readonly worker: Pick<WorkerOptions, 'sinks'> & { readonly workflowModules: string[]; readonly activity: NonNullable<NonNullable<WorkerOptions['interceptors']>['activity']> };
  readonly client: ClientInterceptors;
  shutdown(): Promise<void>;
}

/**
 * Tracing through `@temporalio/interceptors-opentelemetry`: client, workflow and activity spans,
 * exported by OTLP/HTTP to `endpoint` (`…/v1/traces`). Undefined — nothing loaded, nothing
 * exported — without an endpoint or with WARDEN_TELEMETRY=0.
 */
let active: Tracing | undefined;

export function startTracing(endpoint: string | undefined, serviceName: string, env: NodeJS.ProcessEnv = process.env): Tracing | undefined {
  if (!endpoint || !telemetryEnabled(env)) return undefined;
  // One tracer provider per process: `warden run` has a client and a worker.
  if (active) return active;
  /* eslint-disable @typescript-eslint/no-require-imports -- loaded only when tracing is on */
  const { OTLPTraceExporter } = require('@opentelemetry/exporter-trace-otlp-http') as typeof OtlpHttp;
  const { Resource } = require('@opentelemetry/resources') as typeof Resources;
  const { BasicTracerProvider, BatchSpanProcessor, SimpleSpanProcessor } = require('@opentelemetry/sdk-trace-base') as typeof TraceBase;
  const otel = require('@temporalio/interceptors-opentelemetry') as typeof TemporalOtel;
  /* eslint-enable @typescript-eslint/no-require-imports */
  const resource = new Resource({ 'service.name': serviceName });
  const exporter = new OTLPTraceExporter({ url: `${endpoint.replace(/\/+$/, '')}/v1/traces` });
  const provider = new BasicTracerProvider({ resource });
  provider.addSpanProcessor(new SimpleSpanProcessor(exporter));
  provider.register();
  // The workflows' spans reach the worker a workflow task's worth at a time: sent as they come,
  // a burst of tasks (many intents at once, a collector slow to answer) passes the exporter's 30
  // exports in flight, and it drops the rest. They go out in batches instead.
  const workflowSpans = new BatchSpanProcessor(exporter);
  active = {
    worker: {
      sinks: { exporter: otel.makeWorkflowExporter(workflowSpans, resource) },
      workflowModules: [require.resolve('../workflows/tracing-interceptors')],
      activity: [(ctx) => ({ inbound: new otel.OpenTelemetryActivityInboundInterceptor(ctx) })],
    },
    client: { workflow: [new otel.OpenTelemetryWorkflowClientInterceptor()] },
    async shutdown() {
      await Promise.all([provider.forceFlush(), workflowSpans.forceFlush()]);
    },
  };
  return active;
}
