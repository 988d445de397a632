/**
 * What the ledger records of each safety decision: its type and how severe it is. Every safety
 * decision is exactly one row of `safety_events`; the workflow, the interceptors and the monitors
 * name theirs with these. Pure data: the workflow sandbox imports it too.
 */
export const SAFETY_EVENT_TYPES = [
  // the safety decisions proper
  'CIRCUIT_TRIPPED',
  // an open circuit's cool-down is over: calls go through as probes
  'CIRCUIT_HALF_OPEN',
  'CIRCUIT_RESET',
  'RATE_LIMIT_BLOCK',
  'COST_WARNING',
  'COST_BUDGET_EXCEEDED',
  'ANOMALY_DETECTED',
  'MODE_VIOLATION',
  'ESCALATION_DENIED',
  // intent lifecycle
  'INTENT_STARTED',
  // a start the worker's config forbids, or no intent at all: nothing ran
  'INTENT_REFUSED',
  'STAGE_STARTED',
  'STAGE_COMPLETED',
  'STAGE_FAILED',
  'INTENT_MERGED',
  'INTENT_REJECTED',
  'INTENT_FAILED',
  'INTENT_CANCELLED',
  // an impl attempt's test run
  'TESTS_PASSED',
  'TESTS_FAILED',
  // the spec's test plan against the tests impl wrote and ran (kept, or impl goes back)
  'TEST_PLAN_CHECKED',
  // gates and humans
  'GATE_REQUESTED',
  'GATE_DECIDED',
  'GATE_ESCALATED',
  'DECISION_REFUSED',
  'OVERRIDE',
  'GATE_AUTO_PASSED',
  // another model reviewed a design document (lld, spec) before its gate: its verdict and findings
  'DESIGN_REVIEWED',
  // a person approved their own edit of a design document (the ledger keeps both versions)
  'DOCUMENT_EDITED',
  // the conditions set at the gates before merge, checked on the branch (met, or the merge is blocked)
  'MERGE_CONDITIONS_CHECKED',
  // the base branch moved while the intent waited: rebased and tested again, or sent back
  'BASE_MOVED',
  // a gate's wait is four-fifths over with no decision
  'GATE_TIMEOUT_NEAR',
  // a notification channel did not take a notification after its last attempt
  'NOTIFICATION_UNDELIVERED',
  // the web app refused a decision link: forged, expired, used before, or for a gate no longer open
  'DECISION_LINK_REFUSED',
  // risk and the automation ladder
  'RISK_ASSESSED',
  'LADDER_LEVEL_CHANGED',
  // controls
  'GLOBAL_STOP_SET',
  'GLOBAL_STOP_CLEARED',
  'INTENT_STOPPED',
  // a stopped intent did not close in time and was terminated
  'STOP_ESCALATED',
  // the sweeper cleaned what an intent that ended without its cleanup (terminated, timed out) left
  'INTENT_SWEPT',
  // the sweeper found an intent whose workflow was terminated from outside (Web UI, temporal CLI)
  'INTENT_TERMINATED',
  // limits and detectors (safety interceptors)
  'MAX_ITERATIONS_EXCEEDED',
  'STAGNATION_DETECTED',
  'TIME_LIMIT_EXCEEDED',
  'BUDGET_RESERVATION_DENIED',
  'CASCADE_DETECTED',
  'SANDBOX_ESCAPE_ATTEMPTED',
  // what agent-written code tried that its sandbox stopped or kept to itself (a connection to a
  // watched port, a write to an rc file or credential path in its scratch space), and secrets the
  // gateway cut from the model's answers: evidence, never the payload (src/shared/sandbox-attempts.ts)
  'ESCAPE_ATTEMPTED',
  'ANSWER_REDACTED',
  // the secret scan of a change: a credential held back (never committed), or let in where a person allowed it
  'SECRET_IN_CHANGE',
  'SECRET_ALLOWED',
  // the model gateway: a call refused at the wire; an agent given the host's network
  'MODEL_CALL_REFUSED',
  // the recording of an intent's model exchanges reached its size cap: later bodies are not kept
  'RECORDING_CAPPED',
  'HOST_NETWORK_GRANTED',
  // an agent CLI ran with edits only (outside bubblewrap, or narrowed by its profile): it ran no commands
  'CLI_TOOLS_NARROWED',
  // the operator let agent-written code run outside bubblewrap, or the tests reach the network
  'UNCONFINED_CODE_ALLOWED',
  'ROLLBACK',
  // `warden resume`: an ended or running intent's workflow was reset to a stage, with what the reset undid
  'INTENT_RESUMED',
  // the merge gate as a pull request on the team's forge: opened and kept current, reviews that
  // counted or did not, the forge's checks, the merge through the forge, a close, and a forge that failed
  'PULL_REQUEST_OPENED',
  'PULL_REQUEST_UPDATED',
  'FORGE_REVIEW_COUNTED',
  'FORGE_REVIEW_IGNORED',
  'FORGE_CHECKS_WAITING',
  'FORGE_CHECKS_FAILED',
  'FORGE_CHECKS_PASSED',
  'PULL_REQUEST_MERGED',
  'PULL_REQUEST_CLOSED',
  'FORGE_FAILED',
  // a delivery to the web app's forge webhook whose signature (or token) did not hold
  'FORGE_WEBHOOK_REFUSED',
  // the host that held an intent's worktree was gone for `placement.moveAfter`: another host took it over
  'INTENT_MOVED',
  // the scheduled daily health report (severity follows its GREEN / YELLOW / RED)
  'DAILY_HEALTH_REPORT',
  // retention cut rows from the start of the ledger's hash chains: how many, and each chain's cut length and head
  'LEDGER_CHECKPOINT',
  // the hourly anchor: the head of every hash chain that moved since the last one
  'LEDGER_ANCHOR',
] as const;
export type SafetyEventType = (typeof SAFETY_EVENT_TYPES)[number];

/** How serious a safety event is, from routine (info) to stop-everything (critical). */
export const SEVERITIES = ['info', 'low', 'medium', 'high', 'critical'] as const;
export type Severity = (typeof SEVERITIES)[number];
